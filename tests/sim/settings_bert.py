"""A tiny BERT (transformers' BertForMaskedLM from a BertConfig, no download) for
reference_settings_compare.py: its last layer's output LayerNorm backward is credited to the head
after it, the early trigger of docs/simulator.md "Settings" (checkpoint). Captured with
`mhc-torch capture tests/sim/settings_bert.py`."""
import torch
from transformers import BertConfig, BertForMaskedLM

VOCAB, SEQ, BATCH = 512, 64, 2


def build_model():
    config = BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=SEQ, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    return BertForMaskedLM(config)


def make_batch():
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids}


def loss_fn(model, batch):
    return model(**batch).loss
