# Source: https://github.com/henryhungle/MTN/blob/db0aaa53ece29ab38f7a7b7cdc742d5d90fda902/train.py
# Adapted excerpt, before the fix https://github.com/henryhungle/MTN/commit/a4dba761afe5f102687f4a20b98744c94ed5786c
# (trimmed to the code the fix touches; omitted lines are marked).
import torch
# ... (lines 16-16 omitted)
import data_handler as dh
# ... (lines 18-21 omitted)
def run_epoch(data, indices, vocab, epoch, model, loss_compute, eval=False):
    "Standard Training and Logging Function"
    start = time.time()
    total_tokens = 0
    total_loss = 0
    tokens = 0
    it = tqdm(range(len(indices)), desc="epoch {}/{}".format(epoch+1, args.num_epochs), ncols=0)
    for j in it:
        batch = dh.make_batch(data, indices[j], vocab, separate_caption=args.separate_caption, cut_a=args.cut_a)
        b = batch
        if True:
            out, ae_out = model.forward(b)
            if args.auto_encoder_ft == 'caption' or args.auto_encoder_ft == 'summary':
                ntokens_cap = (b.cap != vocab['<blank>']).data.sum()
                loss = loss_compute(out, b.trg_y, b.ntokens, ae_out, b.cap, ntokens_cap)
            elif args.auto_encoder_ft == 'query':
                ntokens_query = (b.query != vocab['<blank>']).data.sum()
                loss = loss_compute(out, b.trg_y, b.ntokens, ae_out, b.query, ntokens_query)
        total_loss += loss
        total_tokens += b.ntokens
        tokens += b.ntokens
        if (j+1) % args.report_interval == 0 and not eval:
            elapsed = time.time() - start
            print("Epoch: %d Step: %d Loss: %f Tokens per Sec: %f" %
                    (epoch+1,j+1, loss / b.ntokens.float(), float(tokens) / elapsed))
            with open(train_log_path, "a") as f:
                f.write("{},{},{:e},{}\n".format(epoch+1,j+1,loss/b.ntokens.float(),float(tokens)/elapsed))
            start = time.time()
            tokens = 0
        #prefetch.join()
    return total_loss / total_tokens.float()
# ... (lines 53-55 omitted)
if __name__ =="__main__":
    ...  # (lines 57-191 omitted)
    for epoch in range(args.num_epochs):
        # start training
        random.shuffle(train_indices)
        model.train()
        train_loss = run_epoch(train_data, train_indices, vocab, epoch,
                  model,
                  SimpleLossCompute(model.generator, model.auto_encoder_generator,
                  criterion,opt=model_opt, l=args.loss_l))
        logging.info("epoch: %d  train loss: %f" % (epoch+1, train_loss))
        # test on validation data
        logging.info('-------validation--------')
        model.eval()
        valid_loss = run_epoch(valid_data, valid_indices, vocab, epoch,
                    model,
                    SimpleLossCompute(model.generator, model.auto_encoder_generator,
                    criterion,opt=None, l=args.loss_l),
                    eval=True)
        logging.info('epoch: %d validation loss: %f' % (epoch+1, valid_loss))
