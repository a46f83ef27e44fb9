# Source: https://github.com/adriansahlman/stylegan2_pytorch/blob/276d16665f50d627e8fdf573df85ac9905a9969f/stylegan2/train.py
# Adapted excerpt, after the fix https://github.com/adriansahlman/stylegan2_pytorch/commit/276d16665f50d627e8fdf573df85ac9905a9969f
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
# ... (lines 9-20 omitted)
class Trainer:
    ...  # (lines 22-431 omitted)
    def _backward(self, loss, opt, mul=1, subdivisions=None):
        ...  # (lines 433-450 omitted)
        if loss is None:
            return 0
        mul /= subdivisions or self.subdivisions
        mul /= self.world_size or 1
        if mul != 1:
            loss *= mul
        if self.half:
            with amp.scale_loss(loss, opt) as scaled_loss:
                scaled_loss.backward()
        else:
            loss.backward()
        #get the scalar only
        return loss.item() * (self.world_size or 1)
    # ... (lines 464-464 omitted)
    def train(self, iterations, callbacks=None, verbose=True):
        ...  # (lines 466-485 omitted)
        for _ in range(iterations):
            ...  # (lines 487-495 omitted)
            # -----| Train G |----- #

            # Disable gradients for D while training G
            self.D.requires_grad_(False)

            for _ in range(self.G_iter):
                self.G_opt.zero_grad()

                G_loss = 0
                for i in range(self.subdivisions):
                    latents, latent_labels = self.prior_generator(
                        multi_latent_prob=self.style_mix_prob)
                    loss, _ = self.G_loss(
                        G=self.G,
                        D=self.D,
                        latents=latents,
                        latent_labels=latent_labels
                    )
                    G_loss += self._backward(loss, self.G_opt)
            # ... (lines 515-552 omitted)
            # -----| Train D |----- #

            # Disable gradients for G while training D
            self.G.requires_grad_(False)

            for _ in range(self.D_iter):
                self.D_opt.zero_grad()

                D_loss = 0
                for i in range(self.subdivisions):
                    latents, latent_labels = self.prior_generator(
                        multi_latent_prob=self.style_mix_prob)
                    reals, real_labels = self._get_batch()
                    loss, _ = self.D_loss(
                        G=self.G,
                        D=self.D,
                        latents=latents,
                        latent_labels=latent_labels,
                        reals=reals,
                        real_labels=real_labels
                    )
                    D_loss += self._backward(loss, self.D_opt)
#                     D_loss += loss
                    D_loss += loss.item()

            # ... (lines 578-638 omitted)
            # Printing
            if verbose:
                value_tracker.add('seen', self.seen + 1, beta=0)
                value_tracker.add('G_lr', self.G_opt.param_groups[0]['lr'], beta=0)
                value_tracker.add('G_loss', G_loss)
                if G_reg:
                    value_tracker.add('G_reg', G_reg_loss)
                    value_tracker.add('G_reg_grad_norm', G_grad_norm)
                    value_tracker.add('pl_avg', self.pl_avg, beta=0)
                else:
                    value_tracker.add('G_loss_grad_norm', G_grad_norm)
                value_tracker.add('D_lr', self.D_opt.param_groups[0]['lr'], beta=0)
                value_tracker.add('D_loss', D_loss)
                if D_reg:
                    value_tracker.add('D_reg', D_reg_loss)
                    value_tracker.add('D_reg_grad_norm', D_grad_norm)
                else:
                    value_tracker.add('D_loss_grad_norm', D_grad_norm)
                for name, value in evaluated_metrics.items():
                    value_tracker.add(name, value, beta=0)
                progress.write(str(value_tracker))

            # Callback
            for callback in utils.to_list(callbacks) + self.callbacks:
                callback(self.seen)

            self.seen += 1

            # clear cache
            torch.cuda.empty_cache()
