# Source: https://github.com/spro/practical-pytorch/pull/29
#   code: char-rnn-generation/train.py, model.py, helpers.py and generate.py at 55e47cc: train()
#   sums the per-character losses into `loss` (loss += criterion(...)) over a 200-character
#   chunk before one backward; the pull request proposed to stop adding the loss to itself and
#   the author answered that the whole graph is needed to backpropagate through time
# Adapted: the text file replaced by 20000 characters of random words made with the standard
#   library (unidecode and argparse dropped; arguments are constants: 300 epochs, chunks of 50
#   characters, print_every 100, hidden size 50, 2 GRU layers); `loss.data[0]` written as
#   `loss.item()` and the Variable wrappers dropped (both fail or are no-ops on current PyTorch),
#   the 0-dim character target given to the loss as target[c].view(1);
#   saving dropped; cpu, seeded.
import math
import random
import string
import time

import torch
import torch.nn as nn

all_characters = string.printable
n_characters = len(all_characters)


def read_file():
    words = [''.join(random.choice(string.ascii_lowercase) for _ in range(random.randint(2, 8)))
             for _ in range(400)]
    text = ''
    while len(text) < 20000:
        text += random.choice(words) + random.choice(' ' * 8 + '.,\n')
    return text, len(text)


def char_tensor(string):
    tensor = torch.zeros(len(string)).long()
    for c in range(len(string)):
        tensor[c] = all_characters.index(string[c])
    return tensor


def time_since(since):
    s = time.time() - since
    m = math.floor(s / 60)
    s -= m * 60
    return '%dm %ds' % (m, s)


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size, n_layers=1):
        super(RNN, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.n_layers = n_layers

        self.encoder = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, n_layers)
        self.decoder = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden):
        input = self.encoder(input.view(1, -1))
        output, hidden = self.gru(input.view(1, 1, -1), hidden)
        output = self.decoder(output.view(1, -1))
        return output, hidden

    def init_hidden(self):
        return torch.zeros(self.n_layers, 1, self.hidden_size)


def generate(decoder, prime_str='A', predict_len=100, temperature=0.8):
    hidden = decoder.init_hidden()
    prime_input = char_tensor(prime_str)
    predicted = prime_str

    for p in range(len(prime_str) - 1):
        _, hidden = decoder(prime_input[p], hidden)

    inp = prime_input[-1]

    for p in range(predict_len):
        output, hidden = decoder(inp, hidden)

        output_dist = output.data.view(-1).div(temperature).exp()
        top_i = torch.multinomial(output_dist, 1)[0]

        predicted_char = all_characters[top_i]
        predicted += predicted_char
        inp = char_tensor(predicted_char)

    return predicted


random.seed(0)
torch.manual_seed(0)
n_epochs, print_every, hidden_size, n_layers, learning_rate, chunk_len = 300, 100, 50, 2, 0.01, 50
file, file_len = read_file()


def random_training_set(chunk_len):
    start_index = random.randint(0, file_len - chunk_len - 1)
    end_index = start_index + chunk_len + 1
    chunk = file[start_index:end_index]
    inp = char_tensor(chunk[:-1])
    target = char_tensor(chunk[1:])
    return inp, target


decoder = RNN(n_characters, hidden_size, n_characters, n_layers)
decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=learning_rate)
criterion = nn.CrossEntropyLoss()

start = time.time()
all_losses = []
loss_avg = 0


def train(inp, target):
    hidden = decoder.init_hidden()
    decoder.zero_grad()
    loss = 0

    for c in range(chunk_len):
        output, hidden = decoder(inp[c], hidden)
        loss += criterion(output, target[c].view(1))

    loss.backward()
    decoder_optimizer.step()

    return loss.item() / chunk_len


print("Training for %d epochs..." % n_epochs)
for epoch in range(1, n_epochs + 1):
    loss = train(*random_training_set(chunk_len))
    loss_avg += loss

    if epoch % print_every == 0:
        print('[%s (%d %d%%) %.4f]' % (time_since(start), epoch, epoch / n_epochs * 100, loss))
        print(generate(decoder, 'Wh', 100), '\n')
