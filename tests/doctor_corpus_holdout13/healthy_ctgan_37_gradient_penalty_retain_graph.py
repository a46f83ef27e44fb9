# Source: https://github.com/sdv-dev/CTGAN/issues/37
#   code: ctgan/synthesizer.py (CTGANSynthesizer.fit, _apply_activate, _cond_loss) and
#   ctgan/models.py (Discriminator.calc_gradient_penalty, Residual, Generator) at the time of
#   the issue
# Adapted: the DataTransformer, Sampler and ConditionalGenerator are stand-ins with the same
#   interfaces over an already transformed random table (two continuous columns of one
#   value plus a 3-mode one-hot each, two discrete columns of 4 and 5 categories);
#   embedding_dim 32, gen_dim and dis_dim (64, 64), batch_size 100, 2000 rows, 4 epochs.
import numpy as np
import torch
from torch import optim
from torch.nn import BatchNorm1d, Dropout, LeakyReLU, Linear, Module, ReLU, Sequential, functional


class Discriminator(Module):
    def calc_gradient_penalty(self, real_data, fake_data, device='cpu', pac=10, lambda_=10):
        alpha = torch.rand(real_data.size(0) // pac, 1, 1, device=device)
        alpha = alpha.repeat(1, pac, real_data.size(1))
        alpha = alpha.view(-1, real_data.size(1))
        interpolates = alpha * real_data + ((1 - alpha) * fake_data)
        disc_interpolates = self(interpolates)
        gradients = torch.autograd.grad(
            outputs=disc_interpolates, inputs=interpolates,
            grad_outputs=torch.ones(disc_interpolates.size(), device=device),
            create_graph=True, retain_graph=True, only_inputs=True)[0]
        return ((gradients.view(-1, pac * real_data.size(1)).norm(2, dim=1) - 1) ** 2).mean() * lambda_

    def __init__(self, input_dim, dis_dims, pack=10):
        super().__init__()
        dim = input_dim * pack
        self.pack, self.packdim = pack, dim
        seq = []
        for item in list(dis_dims):
            seq += [Linear(dim, item), LeakyReLU(0.2), Dropout(0.5)]
            dim = item
        seq += [Linear(dim, 1)]
        self.seq = Sequential(*seq)

    def forward(self, input):
        assert input.size()[0] % self.pack == 0
        return self.seq(input.view(-1, self.packdim))


class Residual(Module):
    def __init__(self, i, o):
        super().__init__()
        self.fc, self.bn, self.relu = Linear(i, o), BatchNorm1d(o), ReLU()

    def forward(self, input):
        out = self.relu(self.bn(self.fc(input)))
        return torch.cat([out, input], dim=1)


class Generator(Module):
    def __init__(self, embedding_dim, gen_dims, data_dim):
        super().__init__()
        dim, seq = embedding_dim, []
        for item in list(gen_dims):
            seq += [Residual(dim, item)]
            dim += item
        seq.append(Linear(dim, data_dim))
        self.seq = Sequential(*seq)

    def forward(self, input):
        return self.seq(input)


class Transformer:
    output_info = [(1, 'tanh'), (3, 'softmax'), (1, 'tanh'), (3, 'softmax'), (4, 'softmax'), (5, 'softmax')]
    output_dimensions = 17


class ConditionalGenerator:
    spans = [(8, 4), (12, 5)]
    n_opt = 9

    def sample(self, batch):
        col = np.random.randint(0, 2, batch)
        opt = np.array([np.random.randint(self.spans[c][1]) for c in col])
        vec = np.zeros((batch, self.n_opt), dtype='float32')
        mask = np.zeros((batch, 2), dtype='float32')
        vec[np.arange(batch), np.where(col == 0, 0, 4) + opt] = 1
        mask[np.arange(batch), col] = 1
        return vec, mask, col, opt


class CTGANSynthesizer:
    def __init__(self, embedding_dim=32, gen_dim=(64, 64), dis_dim=(64, 64), l2scale=1e-6, batch_size=100):
        self.embedding_dim, self.gen_dim, self.dis_dim = embedding_dim, gen_dim, dis_dim
        self.l2scale, self.batch_size, self.device = l2scale, batch_size, torch.device("cpu")
        self.transformer, self.cond_generator = Transformer(), ConditionalGenerator()

    def _apply_activate(self, data):
        data_t, st = [], 0
        for item in self.transformer.output_info:
            ed = st + item[0]
            if item[1] == 'tanh':
                data_t.append(torch.tanh(data[:, st:ed]))
            else:
                data_t.append(functional.gumbel_softmax(data[:, st:ed], tau=0.2))
            st = ed
        return torch.cat(data_t, dim=1)

    def _cond_loss(self, data, c, m):
        loss = [functional.cross_entropy(data[:, 8:12], torch.argmax(c[:, 0:4], dim=1), reduction='none'),
                functional.cross_entropy(data[:, 12:17], torch.argmax(c[:, 4:9], dim=1), reduction='none')]
        loss = torch.stack(loss, dim=1)
        return (loss * m).sum() / data.size()[0]

    def fit(self, train_data, epochs=4, n_discriminator=5):
        data_dim = self.transformer.output_dimensions
        self.generator = Generator(self.embedding_dim + self.cond_generator.n_opt, self.gen_dim, data_dim)
        self.discriminator = Discriminator(data_dim + self.cond_generator.n_opt, self.dis_dim)
        self.optimizerG = optim.Adam(self.generator.parameters(), lr=2e-4, betas=(0.5, 0.9), weight_decay=self.l2scale)
        self.optimizerD = optim.Adam(self.discriminator.parameters(), lr=2e-4, betas=(0.5, 0.9))
        mean = torch.zeros(self.batch_size, self.embedding_dim, device=self.device)
        std = mean + 1
        steps_per_epoch = max(len(train_data) // self.batch_size, 1)
        for i in range(epochs):
            for id_ in range(steps_per_epoch):
                for n in range(n_discriminator):
                    fakez = torch.normal(mean=mean, std=std)
                    c1, m1, col, opt = self.cond_generator.sample(self.batch_size)
                    c1 = torch.from_numpy(c1).to(self.device)
                    fakez = torch.cat([fakez, c1], dim=1)
                    perm = np.arange(self.batch_size)
                    np.random.shuffle(perm)
                    real = train_data[np.random.randint(0, len(train_data), self.batch_size)]
                    c2 = c1[perm]
                    fake = self.generator(fakez)
                    fakeact = self._apply_activate(fake)
                    real = torch.from_numpy(real.astype('float32')).to(self.device)
                    fake_cat = torch.cat([fakeact, c1], dim=1)
                    real_cat = torch.cat([real, c2], dim=1)
                    y_fake = self.discriminator(fake_cat)
                    y_real = self.discriminator(real_cat)
                    pen = self.discriminator.calc_gradient_penalty(real_cat, fake_cat, self.device)
                    loss_d = -(torch.mean(y_real) - torch.mean(y_fake))
                    self.optimizerD.zero_grad()
                    pen.backward(retain_graph=True)
                    loss_d.backward()
                    self.optimizerD.step()
                fakez = torch.normal(mean=mean, std=std)
                c1, m1, col, opt = self.cond_generator.sample(self.batch_size)
                c1, m1 = torch.from_numpy(c1), torch.from_numpy(m1)
                fakez = torch.cat([fakez, c1], dim=1)
                fake = self.generator(fakez)
                fakeact = self._apply_activate(fake)
                y_fake = self.discriminator(torch.cat([fakeact, c1], dim=1))
                cross_entropy = self._cond_loss(fake, c1, m1)
                loss_g = -torch.mean(y_fake) + cross_entropy
                self.optimizerG.zero_grad()
                loss_g.backward()
                self.optimizerG.step()
            print("Epoch %d, Loss G: %.4f, Loss D: %.4f" % (i + 1, loss_g.detach().cpu(), loss_d.detach().cpu()))


torch.manual_seed(0)
np.random.seed(0)
rows = np.random.rand(2000, 17).astype('float32')
CTGANSynthesizer().fit(rows)
