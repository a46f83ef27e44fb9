# Source: https://github.com/statgarten/playdoh/pull/23
#   code: server.py (seq2dataset, numpy_to_torch, LSTM_, train_time_model, test_time_model,
#   additional_pred and the /time_train_pred endpoint's steps) at 8dc4d9d, the pull request's head
# Adapted: LSTM_, train_time_model, test_time_model and additional_pred kept as they were
#   (Variable dropped in numpy_to_torch, the per-epoch print every 10 epochs); the FastAPI
#   endpoint written as plain calls in the same order; the uploaded csv by a noisy sine series of
#   400 points split 300/100, sklearn's MinMaxScaler by a numpy stand-in with the same
#   fit_transform/transform/inverse_transform calls; window 30, horizon 1, 40 training epochs,
#   num_features = 60 additional steps; cpu, seeded.
import numpy as np
import torch
import torch.nn as nn


class MinMaxScaler:
    def fit_transform(self, x):
        self.min_, self.max_ = x.min(0), x.max(0)
        return self.transform(x)

    def transform(self, x):
        return (x - self.min_) / (self.max_ - self.min_)

    def inverse_transform(self, x):
        return x * (self.max_ - self.min_) + self.min_


def seq2dataset(input_data, label_data, window, horizon):
    X = []
    Y = []
    for i in range(len(input_data) - (window + horizon) + 1):
        x = input_data[i:(i + window)]
        y = label_data[i + window + horizon - 1]
        X.append(x)
        Y.append(y)
    return np.array(X), np.array(Y)


def numpy_to_torch(train_x, train_y, test_x, test_y):
    train_x_tensor = torch.Tensor(train_x)
    train_y_tensor = torch.Tensor(train_y)
    test_x_tensor = torch.Tensor(test_x)
    test_y_tensor = torch.Tensor(test_y)
    return train_x_tensor, train_y_tensor, test_x_tensor, test_y_tensor


class LSTM_(nn.Module):
    def __init__(self, input_dim, hidden_dim, num_layers, output_dim):
        super(LSTM_, self).__init__()
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.input_dim = input_dim
        self.lstm = nn.LSTM(input_dim, hidden_dim, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_dim, output_dim)

    def forward(self, x):
        h0, c0 = self.init_hidden(x)
        out, (hn, cn) = self.lstm(x, (h0, c0))
        out = self.fc(out[:, -1, :])
        return out

    def init_hidden(self, x):
        h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_dim)
        c0 = torch.zeros(self.num_layers, x.size(0), self.hidden_dim)
        return h0, c0


def train_time_model(learning_rate, num_epochs, train_x_tensor, train_y_tensor, device):
    model = LSTM_(input_dim=1, hidden_dim=128, output_dim=1, num_layers=2).to(device)
    loss_check = []
    loss_function = torch.nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    best_loss = 10 ** 9
    patience_limit = 30
    patience_check = 0
    for epoch in range(num_epochs):
        outputs = model(train_x_tensor.to(device))
        optimizer.zero_grad()
        loss = loss_function(outputs, train_y_tensor.to(device))
        loss_check.append(loss.item())
        loss.backward()
        optimizer.step()
        if (epoch + 1) % 10 == 0:
            print("Epoch : %d, loss : %1.5f" % (epoch + 1, loss.item()))
        if loss > best_loss:
            patience_check += 1
            if patience_check >= patience_limit:
                break
        else:
            best_loss = loss
            patience_check = 0
    return model, loss_check


def test_time_model(model, test_x_tensor, scaler, device):
    model.eval()
    with torch.no_grad():
        test_predict = model(test_x_tensor.to(device))
    predict_data = test_predict.data.detach().cpu().numpy()
    inverse_predict_data = scaler.inverse_transform(predict_data)
    inverse_pred_lst = [i[0] for i in inverse_predict_data]
    pred_lst = [i[0] for i in predict_data]
    return inverse_pred_lst, pred_lst


def additional_pred(model, input_sequense, num_features, scaler, device):
    model.eval()
    for i in range(num_features):
        plus_predict = model(input_sequense.to(device))
        plus_tensor = torch.cat([input_sequense.squeeze(0).to(device), plus_predict[[0]]], dim=0)[1:].unsqueeze(0)
        if i != 0:
            plus_test_tensor = torch.cat([plus_test_tensor.to(device), plus_tensor.to(device)])
        else:
            plus_test_tensor = plus_tensor
        input_sequense = plus_tensor
    print('plus_test_tensor shape :', plus_test_tensor.shape)
    with torch.no_grad():
        test_plus_predict = model(plus_test_tensor.to(device))
    additional_predict_data = test_plus_predict.data.detach().cpu().numpy()
    additional_plus_data = scaler.inverse_transform(additional_predict_data)
    print('additional_plus_data shape :', additional_plus_data.shape)
    return additional_plus_data


torch.manual_seed(0)
rng = np.random.RandomState(0)
device = 'cpu'
series = (np.sin(np.arange(400) / 12.0) * 10 + 50 + rng.randn(400)).astype(np.float32)[:, None]
x_train, y_train, x_test, y_test = series[:300], series[:300], series[300:], series[300:]
x_scaler, y_scaler = MinMaxScaler(), MinMaxScaler()
x_scaled_train, x_scaled_test = x_scaler.fit_transform(x_train), None
x_scaled_test = x_scaler.transform(x_test)
y_scaled_train = y_scaler.fit_transform(y_train)
y_scaled_test = y_scaler.transform(y_test)
window_size, horizon_factor, num_features = 30, 1, 60
train_x, train_y = seq2dataset(x_scaled_train, y_scaled_train, window_size, horizon_factor)
test_x, test_y = seq2dataset(x_scaled_test, y_scaled_test, window_size, horizon_factor)
train_x_tensor, train_y_tensor, test_x_tensor, test_y_tensor = numpy_to_torch(train_x, train_y, test_x, test_y)
time_series_model, loss_check = train_time_model(0.01, 40, train_x_tensor, train_y_tensor, device)
pred_lst, inverse_pred_lst = test_time_model(time_series_model, test_x_tensor, y_scaler, device)
input_sequense = test_x_tensor[[-1]]
predict_additional_data = additional_pred(time_series_model, input_sequense, num_features, y_scaler, device)
