# Source: https://github.com/jostmey/NakedAttention/blob/2aa6b4ca9dedc87ad2dc0fa5bee0fdc32b9b6fc1/model_and_script.py
# Adapted excerpt, after the fix https://github.com/jostmey/NakedAttention/commit/2aa6b4ca9dedc87ad2dc0fa5bee0fdc32b9b6fc1
# (trimmed to the code the fix touches; omitted lines are marked).
#!/usr/bin/env python3
# ... (lines 2-94 omitted)
a_better = 0.0
state_better = {}

# Loop over the dataset for many epochs
#
for i in range(128):

  # Train the model
  #
  model.train()
  e_train = 0.0
  a_train = 0.0
  for xs_batch, ys_batch in iter(loader_train): # Must use `iter` or `enumerate` for efficiency
    ls_batch = model(xs_batch)
    ps_batch = probability(ls_batch) # Model outputs logits that we must convert to probabilities
    e_batch = loss(ls_batch, ys_batch) # CrossEntropyLoss requires logits
    a_batch = accuracy(ps_batch, ys_batch)
    optimizer.zero_grad()
    e_batch.backward()
    optimizer.step()
    e_train += e_batch.detach()/len(loader_train) # Accumulate average loss for this epoch
    a_train += a_batch.detach()/len(loader_train) # Accumulate average accuracy for this epoch

  # Assess performance on validation data
