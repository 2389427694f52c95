"""A DeepSpeech2-shaped speech model: two strided 2-D convolutions over an 80-bin log-mel
spectrogram, then one nn.GRU of 5 bidirectional layers of 1024 units with dropout 0.1 between
layers (cuDNN's RNN on a GPU: one call for all layers, its reserve space holding every layer's
gates, inner outputs and dropout masks), a linear CTC head over 29 characters; batch 32 x 1,600
frames (16 s of audio at 10 ms). The loss is CTC over fixed-length targets (mean over the batch), its lengths given
as Python lists (as tensors the capture cannot run it: its output's shape depends on their values)."""
import torch
import torch.nn.functional as F
from torch import nn

FEATS, HIDDEN, LAYERS, CHARS, BATCH, FRAMES, TARGET = 80, 1024, 5, 29, 32, 1600, 200


class SpeechGru(nn.Module):
    def __init__(self, hidden=HIDDEN, layers=LAYERS):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, (11, 41), stride=(2, 2), padding=(5, 20)), nn.BatchNorm2d(32), nn.Hardtanh(0, 20),
            nn.Conv2d(32, 32, (11, 21), stride=(1, 2), padding=(5, 10)), nn.BatchNorm2d(32), nn.Hardtanh(0, 20))
        self.rnn = nn.GRU(32 * (FEATS // 4), hidden, num_layers=layers, bidirectional=True, dropout=0.1,
                          batch_first=True)
        self.head = nn.Linear(2 * hidden, CHARS)

    def forward(self, feats):
        x = self.conv(feats.unsqueeze(1))            # batch x 32 x frames/2 x feats/4
        x = x.permute(0, 2, 1, 3).flatten(2)          # batch x frames/2 x 640
        x, _ = self.rnn(x)
        return self.head(x)


def build_model(small=False):
    return SpeechGru(32, 2) if small else SpeechGru()


def make_batch(small=False):
    b, t, n = (2, 40, 5) if small else (BATCH, FRAMES, TARGET)
    return {"feats": torch.randn(b, t, FEATS), "targets": torch.randint(1, CHARS, (b, n)),
            "feat_lens": [t // 2] * b, "target_lens": [n] * b}


def loss_fn(model, batch):
    logp = model(batch["feats"]).float().log_softmax(-1).transpose(0, 1)   # frames x batch x chars
    return F.ctc_loss(logp, batch["targets"], batch["feat_lens"], batch["target_lens"])
