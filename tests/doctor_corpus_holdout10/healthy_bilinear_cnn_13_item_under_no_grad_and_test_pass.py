# Source: https://github.com/HaoMood/bilinear-cnn/issues/13
#   code: src/bilinear_cnn_all.py (BCNN, BCNNManager.train and _accuracy) at commit bcc2883,
#   with the training loop as the reporter rewrote it in the issue
# Adapted: BCNNManager.train uses the reporter's loop (epoch_loss += loss.item() and the
#   accuracy counts under torch.no_grad(), del X, y, score, loss, prediction); _accuracy kept as
#   in the repository (no torch.no_grad()); VGG-16 features -> two conv layers with 32 channels
#   (bilinear pooling of a 32x14x14 map, 32**2 features), 448x448 CUB-200 images -> 40 random
#   3x56x56 images per split with 20 classes, batch size 8, test batch size 8, 4 epochs, the
#   DataParallel/.cuda() calls, the data transforms and the checkpoint loading dropped;
#   ReduceLROnPlateau kept; cpu, seeded.
import torch
import torch.utils.data

torch.manual_seed(0)


class BCNN(torch.nn.Module):
    def __init__(self):
        torch.nn.Module.__init__(self)
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
        # Linear classifier.
        self.fc = torch.nn.Linear(32**2, 20)

    def forward(self, X):
        N = X.size()[0]
        assert X.size() == (N, 3, 56, 56)
        X = self.features(X)
        assert X.size() == (N, 32, 14, 14)
        X = X.view(N, 32, 14**2)
        X = torch.bmm(X, torch.transpose(X, 1, 2)) / (14**2)  # Bilinear
        assert X.size() == (N, 32, 32)
        X = X.view(N, 32**2)
        X = torch.sqrt(X + 1e-5)
        X = torch.nn.functional.normalize(X)
        X = self.fc(X)
        assert X.size() == (N, 20)
        return X


class BCNNManager(object):
    def __init__(self, options):
        print('Prepare the network and data.')
        self._options = options
        self._net = BCNN()
        self._criterion = torch.nn.CrossEntropyLoss()
        self._solver = torch.optim.SGD(
            self._net.parameters(), lr=self._options['base_lr'],
            momentum=0.9, weight_decay=self._options['weight_decay'])
        self._scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            self._solver, mode='max', factor=0.1, patience=3,
            threshold=1e-4)
        train_data = torch.utils.data.TensorDataset(torch.randn(40, 3, 56, 56),
                                                    torch.randint(0, 20, (40,)))
        test_data = torch.utils.data.TensorDataset(torch.randn(40, 3, 56, 56),
                                                   torch.randint(0, 20, (40,)))
        self._train_loader = torch.utils.data.DataLoader(
            train_data, batch_size=self._options['batch_size'], shuffle=True)
        self._test_loader = torch.utils.data.DataLoader(
            test_data, batch_size=8, shuffle=False)

    def train(self):
        print('Training.')
        best_acc = 0.0
        best_epoch = None
        print('Epoch\tTrain loss\tTrain acc\tTest acc')
        for t in range(self._options['epochs']):
            epoch_loss = 0
            num_correct = 0
            num_total = 0
            total_batches = 0
            for X, y in self._train_loader:
                # Forward pass.
                score = self._net(X)
                loss = self._criterion(score, y.long())

                with torch.no_grad():
                    epoch_loss += loss.item()
                    # Prediction.
                    prediction = torch.argmax(score, dim=1)
                    num_total += y.size(0)
                    num_correct += torch.sum(prediction == y.long()).item()

                # Backward pass.
                self._solver.zero_grad()
                loss.backward()
                self._solver.step()

                total_batches += 1
                del X, y, score, loss, prediction
            train_acc = 100 * num_correct / num_total
            test_acc = self._accuracy(self._test_loader)
            self._scheduler.step(test_acc)
            if test_acc > best_acc:
                best_acc = test_acc
                best_epoch = t + 1
                print('*', end='')
            print('%d\t%4.3f\t\t%4.2f%%\t\t%4.2f%%' %
                  (t+1, epoch_loss / total_batches, train_acc, test_acc))
        print('Best at epoch %s, test accuaray %f' % (best_epoch, best_acc))

    def _accuracy(self, data_loader):
        self._net.train(False)
        num_correct = 0
        num_total = 0
        for X, y in data_loader:
            # Prediction.
            score = self._net(X)
            _, prediction = torch.max(score.data, 1)
            num_total += y.size(0)
            num_correct += torch.sum(prediction == y.data).item()
        self._net.train(True)  # Set the model to training phase
        return 100 * num_correct / num_total


options = {'base_lr': 0.05, 'batch_size': 8, 'epochs': 4, 'weight_decay': 5e-4}
manager = BCNNManager(options)
manager.train()
