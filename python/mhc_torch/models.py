"""Named models for capture: Hugging Face configurations built in code (no download) and the mHC
transformer. Each preset gives a builder, a batch maker and a loss for `capture`."""
from __future__ import annotations

# torch is imported inside the builders: the CLI validates its arguments and reads runs without it.


def _tokens(batch: int, seq: int, vocab: int):
    def make():
        import torch

        ids = torch.randint(0, vocab, (batch, seq))
        return {"input_ids": ids, "labels": ids.clone()}
    return make


def _hf(config_fn, batch, seq, layers):
    def build():
        from transformers import AutoModelForCausalLM

        cfg = config_fn()
        if layers is not None:
            cfg.num_hidden_layers = layers
        cfg.use_cache = False
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
        model.train()
        return model
    return build


def llama2_7b_config():
    from transformers import LlamaConfig
    # Llama 2 7B (Touvron et al. 2023; the meta-llama/Llama-2-7b-hf config.json).
    return LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=4096,
                       rms_norm_eps=1e-5, tie_word_embeddings=False)


def llama3_70b_config():
    from transformers import LlamaConfig
    # Llama 3 70B (the meta-llama/Meta-Llama-3-70B config.json): GQA 64/8, rope theta 500k.
    return LlamaConfig(vocab_size=128256, hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
                       num_attention_heads=64, num_key_value_heads=8, max_position_embeddings=8192,
                       rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False)


def gpt2_small_config():
    from transformers import GPT2Config
    # GPT-2 124M (Radford et al. 2019; the openai-community/gpt2 config.json).
    return GPT2Config(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12)


def tiny_gpt2_config():
    from transformers import GPT2Config
    # GPT-2's special tokens are its last (50256): here too, or transformers warns on every capture
    # that 50256 is outside the vocabulary, of a config the user did not write.
    return GPT2Config(vocab_size=256, n_positions=512, n_embd=64, n_layer=2, n_head=4, bos_token_id=255,
                      eos_token_id=255)


def _gpt2(batch, seq, layers, config_fn=gpt2_small_config):
    def build():
        from transformers import GPT2LMHeadModel

        cfg = config_fn()
        if layers is not None:
            cfg.n_layer = layers
        cfg.use_cache = False
        m = GPT2LMHeadModel(cfg)
        # The causal-LM loss transformers uses anyway, named: it finds none in the class name
        # GPT2LMHeadModel and warned "`loss_type=None` ... unrecognized" on every capture.
        m.loss_type = "ForCausalLM"
        m.train()
        return m
    return build


def _mhc(batch, seq, layers, n, hidden=6144, heads=48, kv_heads=8, ffn=16384, vocab=129280):
    from .mhc_model import MhcConfig, MhcTransformer

    cfg = MhcConfig(layers=layers if layers is not None else 64, hidden=hidden, heads=heads, kv_heads=kv_heads,
                    ffn=ffn, vocab=vocab, max_seq=seq, n=n)

    def loss(model, b):
        return model(b["input_ids"], b["labels"])
    return cfg, (lambda: MhcTransformer(cfg)), loss


PRESETS = ["llama2-7b", "gpt2-small", "llama3-70b-slice", "mhc-27b", "tiny-llama", "tiny-mhc", "tiny-gpt2"]
# The most layers --layers takes: a real model's whole depth (--layers takes a slice of it;
# llama3-70b-slice: 4 of Llama 3 70B's 80 by default); the tiny test models, 2 layers by default, are
# made up and may be made deeper.
_DEPTH = {"llama2-7b": 32, "gpt2-small": 12, "llama3-70b-slice": 80, "mhc-27b": 64, "tiny-llama": 64, "tiny-mhc": 64,
          "tiny-gpt2": 64}


def depth(name: str) -> int:
    """The most transformer layers a preset's model may have (--layers)."""
    return _DEPTH[name]


def preset(name: str, batch: int = 1, seq: int = 4096, layers: int | None = None, hc: int = 4):
    """(build, make_batch, loss_fn or None, layers) of a named model."""
    if name == "llama2-7b":
        cfg = llama2_7b_config()
        return _hf(llama2_7b_config, batch, seq, layers), _tokens(batch, seq, cfg.vocab_size), None, layers or 32
    if name == "llama3-70b-slice":
        cfg = llama3_70b_config()
        n = layers or 4
        return _hf(llama3_70b_config, batch, seq, n), _tokens(batch, seq, cfg.vocab_size), None, n
    if name == "gpt2-small":
        return _gpt2(batch, seq, layers), _tokens(batch, seq, 50257), None, layers or 12
    if name == "tiny-gpt2":
        return _gpt2(batch, seq, layers, tiny_gpt2_config), _tokens(batch, seq, 256), None, layers or 2
    if name == "tiny-llama":
        from transformers import LlamaConfig

        def cfg():
            return LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512)
        return _hf(cfg, batch, seq, layers), _tokens(batch, seq, 256), None, layers or 2
    if name == "mhc-27b":
        cfg, build, loss = _mhc(batch, seq, layers, hc)
        return build, _tokens(batch, seq, cfg.vocab), loss, cfg.layers
    if name == "tiny-mhc":
        cfg, build, loss = _mhc(batch, seq, layers or 2, hc, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=256)
        return build, _tokens(batch, seq, cfg.vocab), loss, cfg.layers
    raise ValueError(f"unknown model '{name}'; valid: {', '.join(PRESETS)}")
