# Source: https://github.com/cdtools-developers/cdtools/pull/87
#   code: src/cdtools/models/base.py (CDIModel.inspect in panel plot mode, Adam_optimize)
#   and src/cdtools/tools/plotting/plotting.py (plot_image, plot_amplitude, plot_phase)
#   at the parent of commit d5f898a3fd49dbf8dcfdb34131ee9682f2d1d31e
# Adapted: matplotlib is not installed: pyplot, Figure, SubFigure, the canvas with its
#   callback registry, Axes and Slider are small stand-ins with the same calls (figures are
#   looked up by title, subfigures share the parent canvas); the ptychography model is a
#   4-mode 256x256 probe fitted to random diffraction patterns; plot_image keeps only the
#   slider and key-press parts; 40 epochs, inspect() after each.
import numpy as np
import torch as t


class CallbackRegistry:
    def __init__(self):
        self.callbacks = {}
        self._cid = 0

    def connect(self, signal, func):
        self._cid += 1
        self.callbacks.setdefault(signal, {})[self._cid] = func
        return self._cid

    def disconnect(self, cid):
        for cid_map in self.callbacks.values():
            cid_map.pop(cid, None)


class Canvas:
    def __init__(self):
        self.callbacks = CallbackRegistry()
        self.toolbar = None

    def mpl_connect(self, s, func):
        return self.callbacks.connect(s, func)

    def mpl_disconnect(self, cid):
        self.callbacks.disconnect(cid)


class Axes:
    def imshow(self, data, **kwargs):
        self.data = data
        return self


class Slider:
    def __init__(self, ax, label, valmin, valmax, valinit=0, **kwargs):
        self.val, self.observers = valinit, []

    def on_changed(self, func):
        self.observers.append(func)

    def disconnect_events(self):
        self.observers = []


class SubFigure:
    def __init__(self, parent):
        self.figure, self.canvas, self.axes = parent, parent.canvas, []

    def add_axes(self, rect):
        self.axes.append(Axes())
        return self.axes[-1]


class Figure(SubFigure):
    def __init__(self):
        self.canvas, self.axes, self.subfigs = Canvas(), [], []

    def clear(self):
        self.axes, self.subfigs = [], []

    def add_subfigure(self, spec):
        self.subfigs.append(SubFigure(self))
        return self.subfigs[-1]


class plt:
    figures = {}

    @staticmethod
    def figure(title):
        return plt.figures.setdefault(title, Figure())


def plot_image(im, plot_func=lambda x: x, fig=None):
    if isinstance(im, t.Tensor):
        im = im.detach().cpu().numpy()
    slider_axis_map = [(i, n, f'{i}th Axis') for i, n in enumerate(im.shape[:-2]) if n > 1]

    def make_plot(idx_list):
        fig.plot_idx = list(idx_list)
        to_plot = plot_func(im[tuple(fig.plot_idx)])
        if hasattr(fig, '_current_im'):
            fig._current_im.imshow(to_plot)
            return fig
        ax = fig.add_axes([0.1, 0.1, 0.8, 0.8])
        fig._current_im = ax.imshow(to_plot)
        fig._sliders = [Slider(fig.add_axes([0, 0, 1, 0.05]), label, 0, n - 1)
                        for _, n, label in slider_axis_map]
        for s in fig._sliders:
            s.on_changed(lambda val: make_plot([int(val)]))
        return fig

    result_fig = make_plot([0] * len(im.shape[:-2]))

    def on_action(event):
        if getattr(event, 'key', None) in ('up', 'down'):
            make_plot([(fig.plot_idx[0] + 1) % im.shape[0]])

    if len(slider_axis_map) > 0:
        if not hasattr(fig, 'my_callbacks'):
            fig.my_callbacks = []
        for cid in fig.my_callbacks:
            fig.canvas.mpl_disconnect(cid)
        fig.my_callbacks = []
        fig.my_callbacks.append(fig.canvas.mpl_connect('key_press_event', on_action))
    return result_fig


def plot_amplitude(im, fig=None):
    return plot_image(im, plot_func=np.absolute, fig=fig)


def plot_phase(im, fig=None):
    return plot_image(im, plot_func=np.angle, fig=fig)


class FancyPtycho(t.nn.Module):
    plot_panel_list = [
        {'title': 'Probe', 'grid': (1, 2), 'plots': [
            {'subplot': (0, 0), 'plot_func': lambda self, fig: plot_amplitude(
                t.fft.ifft2(self.probe), fig=fig)},
            {'subplot': (0, 1), 'plot_func': lambda self, fig: plot_phase(
                t.fft.ifft2(self.probe), fig=fig)},
        ]},
    ]

    def __init__(self, n_modes=4, shape=(256, 256)):
        super().__init__()
        self.probe = t.nn.Parameter(t.randn(n_modes, *shape, dtype=t.complex64) * 0.1)
        self.loss_history = []

    def forward(self, idx):
        return (t.fft.fft2(self.probe).abs() ** 2).sum(dim=0)

    def Adam_optimize(self, epochs, dataset, lr=0.005):
        optimizer = t.optim.Adam(self.parameters(), lr=lr)
        for epoch in range(epochs):
            loss = 0
            for idx, pattern in enumerate(dataset):
                optimizer.zero_grad()
                l = t.mean((self(idx) - pattern) ** 2)
                l.backward()
                optimizer.step()
                loss += l.item()
            self.loss_history.append(loss / len(dataset))
            yield self.loss_history[-1]

    def inspect(self, dataset=None):
        rendered = []
        for panel_def in self.plot_panel_list[::-1]:
            fig = plt.figure(panel_def['title'])
            for subfig in fig.subfigs:
                if hasattr(subfig, '_sliders'):
                    for slider in subfig._sliders:
                        slider.disconnect_events()
            fig.clear()
            for plot in panel_def['plots']:
                subfig = fig.add_subfigure(plot['subplot'])
                plot['plot_func'](self, subfig)
            rendered.append(fig)
        return rendered


if __name__ == '__main__':
    t.manual_seed(0)
    dataset = [t.rand(256, 256) for _ in range(4)]
    model = FancyPtycho()
    for loss in model.Adam_optimize(40, dataset):
        model.inspect(dataset)
        print(f'loss {loss:.4f}')
