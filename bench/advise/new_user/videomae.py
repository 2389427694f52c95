"""Masked video pre-training with Hugging Face VideoMAE (VideoMAEForPreTraining from a config, no
weights: ViT-B encoder of 12 layers, 768 wide, a 4-layer 384-wide decoder), as its model card and
the VideoMAE fine-tuning scripts run it: clips of 16 frames at 224 x 224 cut into 2 x 16 x 16
tubelets by a Conv3d (1,568 tokens), 90% of the tubes masked by a boolean mask per clip
(bool_masked_pos, the same count in every clip: the model selects the visible tokens with it), the
loss the MSE on the masked tubelets' normalised pixels; AdamW (lr 1.5e-4, weight decay 0.05),
batch 8, bf16 autocast."""
import torch
from transformers import VideoMAEConfig, VideoMAEForPreTraining

BATCH, FRAMES, RES, MASK_RATIO = 8, 16, 224, 0.9


def build_model(small=False):
    if small:
        cfg = VideoMAEConfig(image_size=32, patch_size=16, num_frames=4, tubelet_size=2, hidden_size=64,
                             num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                             decoder_hidden_size=32, decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
                             decoder_intermediate_size=64)
    else:
        cfg = VideoMAEConfig(image_size=RES, num_frames=FRAMES, norm_pix_loss=True)
    return VideoMAEForPreTraining(cfg)


def make_batch(small=False):
    n, frames, res = (2, 4, 32) if small else (BATCH, FRAMES, RES)
    tubes = (frames // 2) * (res // 16) ** 2
    masked = int(MASK_RATIO * tubes) if not small else tubes // 2
    # the same number of masked tubes in every clip, at random places (VideoMAE's tube masking)
    order = torch.rand(n, tubes).argsort(dim=1)
    bool_masked_pos = torch.zeros(n, tubes, dtype=torch.bool)
    bool_masked_pos.scatter_(1, order[:, :masked], True)
    return {"pixel_values": torch.randn(n, frames, 3, res, res), "bool_masked_pos": bool_masked_pos}


def build_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=1.5e-4, weight_decay=0.05)
