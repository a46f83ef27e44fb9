# Source: https://github.com/macrocosm-os/pretraining/blob/829f4057097d375211267f8bd059d5901693e4e2/pretrain/validation.py
# Adapted excerpt, before the fix https://github.com/macrocosm-os/pretraining/commit/3fbed848fa0c8f45efed65fb6b0059cdd695d103
# (trimmed to the code the fix touches; omitted lines are marked).
# The MIT License (MIT)
# Copyright © 2023 Yuma Rao
# Copyright © 2023 const

# Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated
# documentation files (the “Software”), to deal in the Software without restriction, including without limitation
# the rights to use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software,
# and to permit persons to whom the Software is furnished to do so, subject to the following conditions:

# The above copyright notice and this permission notice shall be included in all copies or substantial portions of
# the Software.

# THE SOFTWARE IS PROVIDED “AS IS”, WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO
# THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL
# THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION
# OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
# DEALINGS IN THE SOFTWARE.

# Tools for performing validation over models.

import math
import torch
import typing
import constants
import traceback
import bittensor as bt


# ... (lines 29-141 omitted)
def compute_losses(
    model, batches: typing.List[torch.Tensor], device: str, pad_token_id: int
) -> typing.List[float]:
    """
    Computes the losses for a given model on provided batches.

    Parameters:
        model (torch.nn.Module): The model for which losses are to be computed.
        batches (dict): A list of batches.
        device (str): The device to use for computation (e.g., 'cpu', 'gpu').
        pad_token_id int: Pad token id for the tokenizer used to tokenize the batches.

    Returns:
        dict: A dictionary with page indices as keys and lists of loss values as values.
    """
    model.to(device)
    model.eval()

    # First check that model generates reasonable looking outputs.
    # Grab 100 tokens from the first two batches as 'prompts'. (1 x Seq Length tensors.)
    prompt_length = 100
    falcon_token_inputs_1 = (batches[0][:, :prompt_length]).to(device)
    falcon_token_inputs_2 = (batches[1][:, :prompt_length]).to(device)

    if not check_for_reasonable_output(
        model, falcon_token_inputs_1, falcon_token_inputs_2, pad_token_id
    ):
        return [math.inf for _ in range(len(batches))]

    # Everything looks good! Continue to computing actual losses.

    # Iterate over each page and corresponding batches
    losses = []
    for batch in batches:
        try:
            inputs = batch.to(device)
            logits = model(inputs).logits

            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = inputs[..., 1:].contiguous()
            # Flatten the tokens
            loss_fct = torch.nn.CrossEntropyLoss()
            shift_logits = shift_logits.view(-1, model.config.vocab_size)
            shift_labels = shift_labels.view(-1)
            loss = loss_fct(shift_logits, shift_labels).item()

            losses.append(loss)
        except Exception as e:
            bt.logging.error(f"Exception occurred: {e}")
            traceback.print_exc()  # Print the stack trace
            losses.append(math.inf)  # Use infinity to indicate failure

    return losses
