# Source: https://github.com/X-niper/UniTalker/blob/4c80e8a40c0f72afaab759389c333a8c92cb519f/main/demo.py
# Adapted excerpt, after the fix https://github.com/X-niper/UniTalker/commit/4c80e8a40c0f72afaab759389c333a8c92cb519f
# (trimmed to the code the fix touches; omitted lines are marked).
import librosa
import numpy as np
import os
import torch
# ... (lines 5-68 omitted)
def main():
    ...  # (lines 70-131 omitted)
    model = UniTalker(args)
    model.load_state_dict(checkpoint, strict=False)
    model.eval()
    model.cuda()

    wav_f_names = get_all_audios(args.test_wav_dir)
    out_npz_path = args.test_out_path
    dirname = os.path.dirname(out_npz_path)
    os.makedirs(dirname, exist_ok=True)


    out_dict = {}
    loss_module = UniTalkerLoss(args).cuda()
    processor = Wav2Vec2FeatureExtractor.from_pretrained(
        args.audio_encoder_repo,)

    with torch.no_grad():
        for wav_f in wav_f_names:
            out_dict[wav_f] = {}
            wav_path = os.path.join(args.test_wav_dir, wav_f)
            audio_data, sr = librosa.load(wav_path, sr=16000)
            audio_data = np.squeeze(
                processor(audio_data, sampling_rate=sr).input_values)

            audio_data_splits = split_long_audio(audio_data, processor)
            for dataset_name in demo_dataset_name_list:
                template = template_id_config[dataset_name].cuda()
                scale = dataset_config[dataset_name]['scale']
                template = scale * template
                condition_id = condition_id_config[dataset_name].cuda()
                annot_type = dataset_config[dataset_name]['annot_type']
                if annot_type == 'BIWI_23370_vertices':
                    fps = 25
                else:
                    fps = 30

                out_list = []
                for audio_data in audio_data_splits:
                    audio_data = torch.Tensor(audio_data[None]).cuda()
                    out, _, _ = model(
                        audio_data,
                        template,
                        face_motion=None,
                        style_idx=condition_id,
                        annot_type=annot_type,
                        fps=fps,
                    )
                    out_list.append(out.cpu().numpy().squeeze(0))
                out = merge_out_list(out_list, fps)
                out = loss_module.get_vertices(torch.from_numpy(out).cuda(), annot_type)
                out_dict[wav_f][dataset_name] = out.cpu()
        print(f"save results to {out_npz_path}")
        np.savez(out_npz_path, **out_dict)


if __name__ == '__main__':
    main()
