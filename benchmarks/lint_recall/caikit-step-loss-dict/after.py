# Source: https://github.com/caikit/caikit-nlp/blob/c2610428a6a072bc7b5b5fe2996d8d19a95b6372/caikit_nlp/modules/text_generation/peft_prompt_tuning.py
# Adapted excerpt, after the fix https://github.com/caikit/caikit-nlp/commit/c2610428a6a072bc7b5b5fe2996d8d19a95b6372
# (trimmed to the code the fix touches; omitted lines are marked).
from datetime import datetime
# ... (lines 17-22 omitted)
from accelerate import Accelerator
# ... (lines 24-39 omitted)
import torch
# ... (lines 41-90 omitted)
class PeftPromptTuning(ModuleBase):
    ...  # (lines 92-949 omitted)
    @classmethod
    def _execute_train_loop(
        cls,
        model: PeftModel,
        num_epochs: int,
        train_dataloader: DataLoader,
        device: str,
        eval_dataloader: Union[DataLoader, None] = None,
        metric: Optional[Callable] = None,
        learning_rate: int = 1e-3,
        tokenizer: Union[AutoTokenizer, None] = None,
        accumulate_steps: int = 1,
        silence_progress_bars: bool = True,
        torch_dtype: "torch.dtype" = torch.float32,
    ) -> None:
        ...  # (lines 965-1038 omitted)
        training_loss_tracker = []

        step_count = 1

        for epoch in range(num_epochs):
            step_loss_log = {}
            model.train()
            total_loss = 0
            tqdm_loader = tqdm(train_dataloader, disable=silence_progress_bars)
            for batch in tqdm_loader:

                tqdm_loader.set_description("Epoch: {}".format(epoch))

                # TODO Can this dict comprehension always replace "batch.to(device)" for us?
                try:
                    with accelerator.accumulate(model):
                        outputs = model(**batch)
                        loss = outputs.loss
                        # We are converting loss to float explicitely for later use
                        # keeping it in tensor form can potentially cause memory issues
                        loss_float = loss.detach().float().item()
                        total_loss += loss_float
                        accelerator.backward(loss)
                        optimizer.step()
                        lr_scheduler.step()
                        optimizer.zero_grad()
                        step_loss_log[step_count] = loss_float
                        step_count += 1
                except (
                    torch.cuda.OutOfMemoryError  # pylint: disable=catching-non-exception
                ):
                    error(
                        "<NLP07175292E>",
                        MemoryError("Not enough memory available for training!"),
                    )

            log.info("<NLP46114010I>", {"loss": loss_float, "epoch": epoch})

            for step, loss_val in step_loss_log.items():

                # Below is added to be propagated and stored as training_metadata
                training_loss_tracker.append(
                    {
                        "epoch": epoch,
                        "step": step,
                        "value": loss_float,
                        "timestamp": datetime.isoformat(datetime.now()),
                    }
                )
