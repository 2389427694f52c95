"""Hugging Face Wav2Vec2ForCTC, base shape (7 convolutions over the waveform, 12 layers of 768),
16 clips of 10 s at 16 kHz, trained with CTC. Its own loss (labels=...) checks the labels by value
(labels.max() >= vocab_size) and selects them by a mask, which a capture cannot run; the user's
loss computes the same CTC from the logits with F.ctc_loss and the lengths as Python lists.
LayerDrop is off (layerdrop=0.0; the configuration's default 0.1 skips layers by a random draw,
torch.rand([]) < p, which a capture cannot decide): every layer runs, the most memory a step
with LayerDrop can take. SpecAugment is off too (mask_time_prob=0.0): it writes a learned vector
through a random boolean mask (hidden_states[mask] = embed), whose backward selects by the mask's
values. AdamW (default)."""
import torch
import torch.nn.functional as F
from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

BATCH, SAMPLES, TARGET = 16, 160_000, 120


def build_model(small=False):
    if small:
        return Wav2Vec2ForCTC(Wav2Vec2Config(vocab_size=32, hidden_size=32, num_hidden_layers=12, num_attention_heads=4,
                                             intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                                             conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                             num_conv_pos_embedding_groups=4, layerdrop=0.0, mask_time_prob=0.0))
    return Wav2Vec2ForCTC(Wav2Vec2Config(vocab_size=32, layerdrop=0.0, mask_time_prob=0.0))


def make_batch(small=False):
    n, samples, target = (2, 1600, 20) if small else (BATCH, SAMPLES, TARGET)
    lengths = [target - 20 * (i % 2) for i in range(n)]   # every other transcript 20 tokens shorter
    return {"input_values": torch.randn(n, samples), "targets": torch.randint(1, 32, (n, target)),
            "target_lengths": lengths}


def loss_fn(model, batch):
    logits = model(input_values=batch["input_values"]).logits
    log_probs = F.log_softmax(logits, dim=-1, dtype=torch.float32).transpose(0, 1)
    frames = [log_probs.shape[0]] * log_probs.shape[1]
    return F.ctc_loss(log_probs, batch["targets"], frames, batch["target_lengths"], blank=0, reduction="mean",
                      zero_infinity=True)
