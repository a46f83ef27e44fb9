# Source: https://github.com/pytorch/pytorch/issues/33864
# Adapted: the endless `while True` loop stopped after 150 iterations and the memory printed
#   every 50; the statm file read with a context manager; a seed added.
import os, torch, gc

torch.manual_seed(0)
length=100
vocab_size = 50
hidden_size=512
vocab_id = 10       # randomly chosen between 0-49

text_lengths = [length]
enc_input = torch.LongTensor([vocab_id for _ in range(length)]).view(1, -1)

embedding = torch.nn.Embedding(vocab_size, hidden_size)
LSTM = torch.nn.LSTM(input_size=hidden_size, hidden_size=hidden_size // 2, num_layers=1, batch_first=True, bidirectional=True)

pid = os.getpid()
count = 0
prev_mem = 0
with torch.no_grad():
    while count < 150:
        output = embedding(enc_input)
        output = torch.nn.utils.rnn.pack_padded_sequence(output, text_lengths, True, enforce_sorted=False)
        output, _ = LSTM(output)
        output, _ = torch.nn.utils.rnn.pad_packed_sequence(output, True)  # NxTx2H

        if count % 50 == 0:
            gc.collect()
            with open('/proc/%s/statm' % pid, 'r') as f:
                cur_mem = (int(f.read().split()[1]) + 0.0) / 256
            add_mem = cur_mem - prev_mem
            prev_mem = cur_mem
            print("     train iterations: %s, added mem: %sM, curr mem: %sM" % (count, add_mem, cur_mem))
        count += 1
