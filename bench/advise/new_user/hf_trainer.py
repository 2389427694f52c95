"""A causal LM fine-tuned with Hugging Face's own Trainer, configured as its users write it:
TrainingArguments(optim="adafactor", activation_checkpointing=True,
activation_checkpointing_kwargs={"use_reentrant": False}, bf16=True) (gradient_checkpointing and
gradient_checkpointing_kwargs before transformers 5). build_model() builds the
Trainer on a Llama shape (transformers LlamaForCausalLM from a config: 8 layers, hidden 2048, 16
heads, MLP 5632, vocabulary 32,000) and turns checkpointing on with the arguments' keywords as
Trainer.train() does before its first step; build_optimizer() is the Trainer's own
create_optimizer() (transformers' Adafactor over its two weight-decay groups); the loss is the
Trainer's compute_loss on the batch (its label shift inside the model). Batch 4 x 2048, bf16
autocast; build_model(small=True) is 2 layers of 64 for the CPU."""
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments


def build_model(small=False):
    cfg = LlamaConfig(hidden_size=64 if small else 2048, intermediate_size=128 if small else 5632,
                      num_hidden_layers=2 if small else 8, num_attention_heads=4 if small else 16,
                      num_key_value_heads=4 if small else 16, vocab_size=1000 if small else 32000)
    model = LlamaForCausalLM(cfg)
    args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="hf_trainer"), optim="adafactor",
                             activation_checkpointing=True, activation_checkpointing_kwargs={"use_reentrant": False},
                             bf16=True, per_device_train_batch_size=4, report_to=[],
                             use_cpu=not torch.cuda.is_available())
    model.trainer = Trainer(model=model, args=args)
    # what Trainer.train() does before its first step
    kwargs = dict(args.activation_checkpointing_kwargs or {})
    every_n_layers, offload = kwargs.pop("every_n_layers", 1), kwargs.pop("offload", False)
    model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs or None,
                                          every_n_layers=every_n_layers, offload=offload)
    return model


def make_batch(small=False):
    n, s = (2, 32) if small else (4, 2048)
    ids = torch.randint(0, 1000, (n, s))
    return {"input_ids": ids, "labels": ids.clone()}


def build_optimizer(model):
    return model.trainer.create_optimizer()


def loss_fn(model, batch):
    return model.trainer.compute_loss(model, batch)
