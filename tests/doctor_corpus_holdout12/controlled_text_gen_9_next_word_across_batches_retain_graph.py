# Source: https://github.com/GBLin5566/toward-controlled-generation-of-text-pytorch/issues/9
#   code: train.py (train_vae_with_attr_loss) and Model/Modules.py (Encoder, Generator, Discriminator) at dfb95cc
# Adapted: keras' IMDB data is replaced by random padded token ids and random labels; sizes are smaller
# (2000 words, sentences of 12, batches of 32, 30 batches, hidden 128); Variable(...) and .data[0] are
# replaced by plain tensors and .item(); backward gets retain_graph=True as the reporter set it (without
# it the second batch raises "Trying to backward through the graph a second time"); Adam is replaced by
# a plain SGD step on p.data, as torch 0.3's optimizers updated parameters (current optimizers bump the
# parameters' version counter and the next backward then raises); the attribute losses are kept for
# printing only, as in the original; CPU only.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD, UNK, BOS, EOS = 0, 1, 2, 3
max_features = 2000
maxlen = 12
batch_size = 32
epoch = 1
c_dim = 2
d_word_vec = 150
lambda_c = 0.1
lambda_z = 0.1


class Encoder(nn.Module):
    def __init__(self, n_src_vocab, n_layers=1, d_word_vec=150, d_inner_hid=128, dropout=0.1, d_out_hid=128):
        super(Encoder, self).__init__()
        self.drop = nn.Dropout(dropout)
        self.src_word_emb = nn.Embedding(n_src_vocab, d_word_vec, padding_idx=PAD)
        self.n_layers = n_layers
        self.d_inner_hid = d_inner_hid
        self.rnn = nn.LSTM(d_word_vec, d_inner_hid, n_layers)
        self._enc_mu = nn.Linear(d_inner_hid, d_out_hid)
        self._enc_log_sigma = nn.Linear(d_inner_hid, d_out_hid)

    def _sample_latent(self, enc_hidden):
        mu = self._enc_mu(enc_hidden)
        log_sigma = self._enc_log_sigma(enc_hidden)
        sigma = torch.exp(log_sigma)
        std_z = torch.from_numpy(np.random.normal(0, 1, size=sigma.size())).float()
        self.z_mean = mu
        self.z_sigma = sigma
        return mu + sigma * std_z

    def forward(self, src_seq, hidden, dont_pass_emb=False):
        if dont_pass_emb:
            enc_input = self.drop(src_seq)
        else:
            enc_input = self.drop(self.src_word_emb(src_seq))
        enc_input = enc_input.permute(1, 0, 2)
        _, hidden = self.rnn(enc_input, hidden)
        hidden = (self._sample_latent(hidden[0]), hidden[1])
        return hidden

    def init_hidden(self, batch_size):
        return [torch.zeros(self.n_layers, batch_size, self.d_inner_hid),
                torch.zeros(self.n_layers, batch_size, self.d_inner_hid)]


class Generator(nn.Module):
    def __init__(self, n_target_vocab, n_layers=1, d_word_vec=150, d_inner_hid=128, c_dim=1, dropout=0.1):
        super(Generator, self).__init__()
        self.drop = nn.Dropout(dropout)
        self.d_inner_hid = d_inner_hid
        self.n_layers = n_layers
        self.target_word_emb = nn.Embedding(n_target_vocab, d_word_vec, padding_idx=PAD)
        self.rnn = nn.LSTM(d_word_vec, d_inner_hid + c_dim, n_layers)
        self.to_word_emb = nn.Sequential(nn.Linear(d_inner_hid + c_dim, d_word_vec), nn.ReLU())
        self.linear = nn.Linear(d_word_vec, n_target_vocab)
        self.one_hot_to_word_emb = nn.Linear(n_target_vocab, d_word_vec)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, target_word, hidden, low_temp=False, one_hot_input=False):
        if one_hot_input:
            dec_input = self.drop(self.one_hot_to_word_emb(target_word)).unsqueeze(0)
        else:
            dec_input = self.drop(self.target_word_emb(target_word)).unsqueeze(0)
        output, hidden = self.rnn(dec_input, hidden)
        output = self.to_word_emb(output)
        output = self.linear(output)
        if low_temp:
            pre_soft = output[0]
            lowed_output = pre_soft / 0.001
            output = self.softmax(lowed_output)
            return output, hidden, pre_soft
        return output, hidden

    def init_hidden_c_for_lstm(self, batch_size):
        return torch.zeros(self.n_layers, batch_size, self.d_inner_hid)


class Discriminator(nn.Module):
    def __init__(self, n_src_vocab, maxlen, d_word_vec=150, dropout=0.1):
        super(Discriminator, self).__init__()
        self.src_word_emb = nn.Embedding(n_src_vocab, d_word_vec, padding_idx=PAD)
        self.drop = nn.Dropout(dropout)
        self.conv1 = nn.Conv1d(maxlen, 128, kernel_size=5)
        self.conv2 = nn.Conv1d(128, 128, kernel_size=5)
        self.linear = nn.Linear(128 * 14, 2)

    def forward(self, input_sentence, dont_pass_emb=False):
        emb_sentence = input_sentence if dont_pass_emb else self.src_word_emb(input_sentence)
        layer1 = F.max_pool1d(F.relu(self.conv1(emb_sentence)), 3)
        layer2 = F.max_pool1d(F.relu(self.conv2(layer1)), 3)
        return self.linear(self.drop(layer2.view(layer2.size()[0], -1)))


class SGD:
    def __init__(self, params, lr):
        self.params, self.lr = params, lr

    def zero_grad(self):
        for p in self.params:
            if p.grad is not None:
                p.grad.data.zero_()

    def step(self):
        for p in self.params:
            if p.grad is not None:
                p.data.add_(p.grad.data, alpha=-self.lr)


def latent_loss(z_mean, z_stddev):
    mean_sq = z_mean * z_mean
    stddev_sq = z_stddev * z_stddev
    return 0.5 * torch.mean(mean_sq + stddev_sq - torch.log(stddev_sq) - 1)


def get_batch_label(data, label, index, batch_size):
    return torch.from_numpy(data[index:index + batch_size]).long(), torch.from_numpy(label[index:index + batch_size]).long()


def train_vae_with_attr_loss(encoder, decoder, discriminator):
    for epoch_index in range(epoch):
        for batch, index in enumerate(range(0, len(x_train) - 1, batch_size)):
            vae_opt.zero_grad()
            vae_loss = 0
            input_data, output_data = get_batch_label(x_train, y_train, index, batch_size)
            enc_hidden = encoder.init_hidden(len(input_data))
            enc_hidden = encoder(input_data, enc_hidden)
            target = np.array([output_data.numpy()]).reshape(-1)
            var_c = torch.from_numpy(np.eye(c_dim)[target]).float()
            cat_hidden = (torch.cat([enc_hidden[0][0], var_c], dim=1).unsqueeze(0),
                          torch.cat([decoder.init_hidden_c_for_lstm(len(input_data))[0], var_c], dim=1).unsqueeze(0))
            batch_init_word = np.zeros((batch_size, max_features))
            batch_init_word[np.arange(batch_size), BOS] = 1
            batch_init_word = torch.from_numpy(batch_init_word).float()
            input_data = input_data.permute(1, 0)
            for index in range(maxlen - 1):
                if 'next_word' in locals():
                    word = next_word.squeeze(1)
                    output, cat_hidden, pre_soft = decoder(word, cat_hidden, low_temp=True, one_hot_input=True)
                else:
                    word = batch_init_word
                    output, cat_hidden, pre_soft = decoder(word, cat_hidden, low_temp=True, one_hot_input=True)
                next_word = output
                correct_word = input_data[index + 1]
                vae_loss += criterion(pre_soft.view(-1, max_features), correct_word)
                if len(batch_init_word.size()) == 2:
                    batch_init_word = batch_init_word.unsqueeze(1)
                if len(next_word.size()) == 2:
                    next_word = next_word.unsqueeze(1)
                batch_init_word = torch.cat([batch_init_word, next_word], dim=1)
            ll = latent_loss(encoder.z_mean, encoder.z_sigma)
            generated_sentence = batch_init_word
            discriminator.eval()
            logit = discriminator(decoder.one_hot_to_word_emb(generated_sentence), dont_pass_emb=True)
            l_attr_c = criterion(logit, output_data)
            avg_loss = vae_loss.item() / maxlen
            total_vae_loss = vae_loss + ll
            total_vae_loss.backward(retain_graph=True)
            vae_opt.step()
            if batch % 10 == 0:
                print("[Attr] Epoch {} batch {}'s average language loss: {}, latent loss: {}, l_attr_c: {}".format(
                    epoch_index, batch, avg_loss, ll.item(), l_attr_c.item()))


x_train = np.random.randint(EOS + 1, max_features, size=(30 * batch_size + 1, maxlen))
y_train = np.random.randint(0, c_dim, size=30 * batch_size + 1)
encoder = Encoder(max_features, d_word_vec=d_word_vec)
decoder = Generator(max_features, d_word_vec=d_word_vec, c_dim=c_dim)
discriminator = Discriminator(max_features, maxlen, d_word_vec=d_word_vec)
criterion = nn.CrossEntropyLoss()
vae_opt = SGD(list(encoder.parameters()) + list(decoder.parameters()), lr=0.05)
train_vae_with_attr_loss(encoder, decoder, discriminator)
