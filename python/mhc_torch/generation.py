"""Hugging Face `generate()` inside a captured step (PPO and other RLHF steps sample rollouts from
the policy under no_grad before the update: bench/advise/new_user/ppo_rlhf.py).

On fake tensors generate() stopped at its first look at a value (`op aten._local_scalar_dense ...
at transformers/generation/utils.py in generate`): its check for right padding, which only decides
whether to log a warning, and after each token whether every sequence has finished, which depends
on the tokens sampled. While the capture runs, a fake rollout runs to its length limit (the
stopping criteria's max_length: prompt + max_new_tokens), the longest it runs on the GPU and the
length of every rollout whose sequences do not all end early (min_new_tokens as large, or no end
of sequence token; generate() given no limit has transformers' default max_length, 20), and
generate()'s own questions about its inputs are answered for prompts of token ids under a mask of
ones (no padding): no dummy ids, no right padding (it decides a warning) and all ones (the
mask is dropped, as on the GPU for such prompts; left-padded prompts keep theirs there, which the
capture leaves out, as it leaves out the mask of packed sequences: gpu_paths). Meta
capture.generate lists each call's max_length."""
from __future__ import annotations

import contextlib
import functools
import inspect
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensor


@contextlib.contextmanager
def generate_on_fake(rec):
    utils = sys.modules.get("transformers.generation.utils")
    if utils is None or not hasattr(utils, "StopCheck") or not hasattr(utils, "GenerationMixin"):
        yield
        return
    mixin, stop_check = utils.GenerationMixin, utils.StopCheck
    original_criteria, original_call, original_item = mixin._get_stopping_criteria, stop_check.__call__, \
        torch.Tensor.item
    limits: list[int | None] = []   # the max_length of the generate() calls running, innermost last

    @functools.wraps(original_criteria)
    def criteria(self, *args, **kwargs):
        found = original_criteria(self, *args, **kwargs)
        limits.append(getattr(found, "max_length", None))
        rec.generate_lengths.append(limits[-1])
        return found

    @functools.wraps(original_call)
    def call(self, unfinished_sequences, tokens, length):
        if not isinstance(unfinished_sequences, FakeTensor):
            return original_call(self, unfinished_sequences, tokens, length)
        limit = limits[-1] if limits else None
        if limit is None:   # no length criterion (transformers gives max_length 20 by default): a value's
            return original_call(self, unfinished_sequences, tokens, length)
        if length >= limit:
            limits.pop()
            return True
        return False

    original_bool = torch.Tensor.__bool__
    # generate()'s questions about its inputs' values, answered for prompts of token ids (no
    # negative dummy ids) under a mask of ones: (function, item() or bool()) -> the answer
    answers = {
        (inspect.unwrap(mixin.generate).__code__, "item"): False,   # torch.any(mask[:, -1] == 0): right padding?
        (inspect.unwrap(mixin.generate).__code__, "bool"): True,    # (mask == 1).all(): drop the mask
        (inspect.unwrap(mixin._get_logits_processor).__code__, "bool"): False,   # (ids < 0).any(): dummy ids?
    }

    def answer(t, kind):
        if not isinstance(t, FakeTensor) or t.dtype != torch.bool:
            return None
        return answers.get((sys._getframe(2).f_code, kind))

    @functools.wraps(original_item)
    def item(self):
        found = answer(self, "item")
        return original_item(self) if found is None else found

    @functools.wraps(original_bool)
    def as_bool(self):
        found = answer(self, "bool")
        return original_bool(self) if found is None else found

    patched = (criteria, call, item, as_bool)
    originals = (original_criteria, original_call, original_item, original_bool)

    def put(values):
        mixin._get_stopping_criteria, stop_check.__call__, torch.Tensor.item, torch.Tensor.__bool__ = values

    put(patched)
    try:
        yield
    finally:
        put(originals)
