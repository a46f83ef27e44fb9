# Source: https://discuss.pytorch.org/t/gpu-cached-memory-increase-when-training-different-models-in-a-loop/48998
# Adapted: the posted loop kept as it is (log_message prints); all_models built as the post
#   describes it (the same architecture, optimizer and criterion for every model): 5 models
#   of two linear layers (1024 -> 256 -> 10) with their Adam optimizers, loaders of 6 random
#   batches of 32 and lr arrays of 3 epochs; device is the cpu here, seeded.
import torch
import torch.nn as nn


def log_message(message):
    print(message)


def make_training_obj():
    model = nn.Sequential(nn.Linear(1024, 256), nn.ReLU(), nn.Linear(256, 10))
    return {'lr_array': [1e-3, 1e-3, 1e-4],
            'optimizer': torch.optim.Adam(model.parameters(), lr=1e-3),
            'train_loader': [(torch.randn(32, 1024), torch.randint(0, 10, (32,))) for _ in range(6)],
            'criterion': nn.CrossEntropyLoss(),
            'model': model}


torch.manual_seed(0)
all_models = {f'model_{i}': make_training_obj() for i in range(5)}

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
for model_name, training_obj in all_models.items():
    num_epochs = len(training_obj['lr_array'])
    log_message('--------------Training model: ' + model_name + ' -------------------------------')
    optimizer = training_obj['optimizer']
    train_loader = training_obj['train_loader']
    criterion = training_obj['criterion']
    model = training_obj.get('model')
    model.to(device)
    model.train()
    epochs_to_run = range(num_epochs)
    for epoch in epochs_to_run:
        torch.cuda.empty_cache()
        for i_batch, (images, labels) in enumerate(train_loader):
            images = images.to(device)
            labels = labels.to(device)
            outputs = model(images).squeeze()
            optimizer.zero_grad()
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
