"""A Hugging Face model's own key/value cache is dropped from the prediction only where the applied
setting turns it off: checkpointing sets config.use_cache = False on the trained model (and a copy
made after the setting copies that config), so a cache that a forward asked for with
use_cache=True, or that a copy made before the setting makes from its own config, stays. Both
were predicted without their cache (the capture named the model that made a cache by walking
Python's frames and took a copy for the model); the prediction then held fewer aten::cat copies
and allocations than the step captured with the setting."""
import copy
import json
import sqlite3
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import mhc_torch  # noqa: E402

LAYER = {"checkpoint": {"modules": ["LlamaForCausalLM.model.layers.0"]}}
# The MLP: a recompute that runs no cache update (a checkpointed layer given use_cache=True would
# append its keys and values to the kept cache again: docs/advise.md, Limits)
MLP = {"checkpoint": {"modules": ["LlamaForCausalLM.model.layers.0.mlp"]}}


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=4, max_position_embeddings=64, use_cache=True)
    return LlamaForCausalLM(cfg)


def _batch():   # with a padding mask, as DPO's batches have (without one, no cache takes another mask path)
    return {"input_ids": torch.randint(0, 256, (4, 32)), "attention_mask": torch.ones(4, 32, dtype=torch.long)}


def _explicit_loss(model, batch):   # a forward that asks for the cache itself
    return model(**batch, use_cache=True).logits.float().square().mean()


class _Early:
    """A frozen reference copied in build_model, before mhc_torch.apply (its own config)."""
    ref = None


def _build_with_early_copy():
    policy = _llama()
    _Early.ref = copy.deepcopy(policy).eval().requires_grad_(False)
    return policy


def _early_copy_loss(model, batch):
    with torch.no_grad():
        reference = _Early.ref(**batch).logits.float()
    return (model(**batch).logits.float() - reference).square().mean()


def _cats(path):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*) FROM kernels k JOIN strings s ON s.id = k.name "
                          "WHERE s.text = 'aten::cat'").fetchone()[0]


def _device(path):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT count(*), sum(bytes) FROM allocations WHERE device = 0").fetchone()


def _updates(path):
    return json.loads(mhc_torch.read_meta(path).get("capture.model_cache_updates", "[]"))


@pytest.mark.parametrize("build, loss, setting, recorded", [
    (_llama, _explicit_loss, MLP, 0),                   # use_cache=True given: the setting leaves it
    (_build_with_early_copy, _early_copy_loss, LAYER, 2),   # the policy's 2 layers; the early copy's stay
], ids=["use_cache-given", "copy-before-setting"])
def test_only_the_caches_the_setting_turns_off_are_dropped(tmp_path, mhc_exe, build, loss, setting, recorded):
    base, captured, predicted = (str(tmp_path / f"{n}.db") for n in ("base", "captured", "predicted"))
    for path, s in ((base, None), (captured, setting)):
        mhc_torch.capture(build, _batch, steps=1, path=path, loss_fn=loss, autocast_dtype=None, setting=s)
    assert len(_updates(base)) == recorded and {u[0] for u in _updates(base)} <= {"LlamaForCausalLM"}
    assert _cats(captured) > 0   # the cache the setting leaves is captured with it
    r = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(setting), "--trace-out", predicted, "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _cats(predicted) == _cats(captured)
    assert _device(predicted) == _device(captured)
    assert json.loads(r.stdout)["rows"][0]["peak_bytes"] == int(mhc_torch.read_meta(captured)["capture.peak_bytes"])


def test_checkpointing_a_layer_that_updates_a_kept_cache_is_refused(tmp_path, mhc_exe):
    """A forward given use_cache=True keeps its cache under checkpointing, and a checkpointed layer's
    recompute appends its keys and values to it again: transformers' attention then stops on a mask
    of half the keys' length (the capture with the setting applied stops there). The capture names
    the modules that update such a cache (meta capture.kept_cache_callers); `--setting` refuses a
    checkpoint around one in one line, and the search offers none (its MLPs' still are modules
    any setting may name)."""
    def batch():   # activations that checkpointing would save (the search offered it, 130 MiB below)
        return {"input_ids": torch.randint(0, 256, (64, 64)), "attention_mask": torch.ones(64, 64, dtype=torch.long)}

    base = str(tmp_path / "base.db")
    mhc_torch.capture(_llama, batch, steps=1, path=base, loss_fn=_explicit_loss, autocast_dtype=None)
    assert json.loads(mhc_torch.read_meta(base)["capture.kept_cache_callers"]) == [
        f"LlamaForCausalLM.model.layers.{i}.self_attn" for i in range(2)]
    with pytest.raises(Exception, match="Attempting to broadcast"):   # what PyTorch does with it
        mhc_torch.capture(_llama, batch, steps=1, path=str(tmp_path / "c.db"), loss_fn=_explicit_loss,
                          autocast_dtype=None, setting=LAYER)
    r = subprocess.run([mhc_exe, "advise", base, "--setting", json.dumps(LAYER)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert ("': field 'checkpoint.modules': module 'LlamaForCausalLM.model.layers.0': its forward "
            "(model.layers.0.self_attn) updates a key/value cache") in r.stderr
    # 134 MiB reserved as captured; at 130 MiB the search answered selective checkpointing of a layer
    r = subprocess.run([mhc_exe, "advise", base, "--capacity", "130MiB", "--top", "3", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["rows"]) == 3
    for row in json.loads(r.stdout)["rows"]:
        groups = row["setting"].get("checkpoint", [])
        assert not any(g["policy"] != "mhc" for g in (groups if isinstance(groups, list) else [groups])), row


@pytest.mark.parametrize("value, says", [
    ('["NoSuchModule"]', "names module 'NoSuchModule', which the trace lacks"),
    ('{"a": 1}', "not a JSON list of module names"),
])
def test_a_bad_kept_cache_meta_is_one_line(tmp_path, mhc_exe, value, says):
    """meta capture.kept_cache_callers read from a trace anyone may have edited: one line naming the
    file and the meta key, exit 2."""
    path = str(tmp_path / "t.db")
    mhc_torch.capture(_llama, _batch, steps=1, path=path, loss_fn=_explicit_loss, autocast_dtype=None)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'capture.kept_cache_callers'", (value,))
    r = subprocess.run([mhc_exe, "advise", path, "--capacity", "1GiB"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{path}: meta capture.kept_cache_callers: {says}" in r.stderr
