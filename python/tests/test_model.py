"""veloxquant.Model on the project's vq-hd128: the same numbers as the CLI on the same inputs."""

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import veloxquant as vq

PROMPT = "The old house on the hill had been empty for years, until"


def test_config_and_tokenizer(model):
    assert model.architecture == "llama"
    assert (model.head_dim, model.layers) == (128, 8)
    assert model.heads == 3 * model.kv_heads
    assert model.vocab == 4096 and model.context_length == 4096
    assert model.parameter_count > 10_000_000
    ids = model.tokenize(PROMPT)
    assert ids[0] != model.tokenize(PROMPT, add_special=False)[0]  # BOS first
    assert model.detokenize(ids) == PROMPT


def test_generate_matches_the_cli(model, model_path, cli):
    ours = model.generate(PROMPT, 24, temp=0, kv="kivi", seed=3)
    theirs = cli("generate", "-m", str(model_path), "-p", PROMPT, "-n", "24", "--temp", "0",
                 "--kv", "kivi", "-s", "3", "-t", "1")
    assert ours.text == theirs["text"]
    assert len(ours.tokens) == theirs["generated_tokens"]
    assert ours.prompt_tokens == theirs["prompt_tokens"]
    assert ours.kv == theirs["kv"] and ours.seed == 3
    assert (ours.kv_bytes, ours.kv_fp16_bytes) == (theirs["kv_bytes"], theirs["kv_fp16_bytes"])


def test_sampling_is_deterministic_for_a_seed(model):
    a = model.generate(PROMPT, 16, temp=0.9, seed=11, kv="turboquant_mse:bits=4")
    b = model.generate(PROMPT, 16, temp=0.9, seed=11, kv="turboquant_mse:bits=4")
    assert a.tokens == b.tokens and a.text == b.text
    assert model.generate(PROMPT, 0).tokens == []


def test_logits_agree_with_greedy_generation(model):
    ids = model.tokenize(PROMPT)
    logits = model.logits(ids, kv="fp16")
    assert logits.shape == (len(ids), model.vocab) and np.isfinite(logits).all()
    first = model.generate(PROMPT, 1, temp=0, kv="fp16").tokens[0]
    assert first == int(np.argmax(logits[-1]))
    # A compressed cache changes the logits, but only a little on a short prompt.
    kivi = model.logits(ids, kv="kivi:kbits=4,vbits=4,residual=0")
    assert not np.array_equal(kivi, logits)
    assert np.abs(kivi - logits).max() < 0.25 * np.abs(logits).max()


def test_perplexity_matches_the_cli(model, model_path, text_file, cli):
    ours = model.perplexity(text_file.read_text(encoding="utf-8"), ctx=128, chunks=3, kv="kivi")
    theirs = cli("perplexity", "-m", str(model_path), "-f", str(text_file), "-c", "128",
                 "--chunks", "3", "--kv", "kivi", "-t", "1")
    assert ours.perplexity == pytest.approx(theirs["perplexity"], rel=1e-9)
    assert ours.perplexity_error == pytest.approx(theirs["perplexity_error"], rel=1e-9)
    for field in ("chunks", "context", "text_tokens", "scored_tokens", "kv_bytes", "kv_fp16_bytes"):
        assert getattr(ours, field) == theirs[field], field


def test_perplexity_of_a_file_and_against_a_baseline(model, text_file, tmp_path):
    base = tmp_path / "base.kl"
    fp16 = model.perplexity(Path(text_file), ctx=128, chunks=2, save_kl_base=str(base))
    assert base.stat().st_size > 0 and not fp16.compared
    same = model.perplexity(text_file.read_text(encoding="utf-8"), ctx=128, chunks=2)
    assert same.perplexity == fp16.perplexity
    # A residual window shorter than the chunk, so that most tokens are read from 2-bit codes.
    kivi = model.perplexity(Path(text_file), ctx=128, chunks=2, kv="kivi:residual=32", kl_base=str(base))
    assert kivi.compared and kivi.kl_mean > 0 and 0.5 < kivi.top1_agreement <= 1
    assert kivi.kv_bytes < fp16.kv_bytes == fp16.kv_fp16_bytes


def test_calibrate_writes_what_the_cli_writes(model, model_path, text_file, cli_path, tmp_path):
    text = text_file.read_text(encoding="utf-8")
    cal = model.calibrate(text, kv="kvquant_nuq:bits=4", out=str(tmp_path / "py"), ctx=128, max_tokens=1024)
    fitted = "kvquant_nuq:bits=4,outliers=0.01,sink=true,weight=activation"
    assert cal["spec"] == f"{fitted},artifacts={tmp_path / 'py'}"
    assert cal["path"] == str(tmp_path / "py" / "kvquant_nuq.vqcal")
    assert (cal["tokens"], cal["layers"], cal["kv_heads"], cal["head_dim"]) == (1024, 8, 1, 128)
    # The same fit as the CLI's, byte for byte, and a spec that perplexity loads.
    subprocess.run([cli_path, "calibrate", "-m", str(model_path), "-f", str(text_file),
                    "--kv", "kvquant_nuq:bits=4", "-o", str(tmp_path / "cli"), "-c", "128",
                    "--max-tokens", "1024", "-t", "1"], check=True, capture_output=True)
    assert (tmp_path / "cli" / "kvquant_nuq.vqcal").read_bytes() == Path(cal["path"]).read_bytes()
    from_file = model.calibrate(Path(text_file), kv="kvquant_nuq:bits=4", out=str(tmp_path / "file"), ctx=128,
                                max_tokens=1024)
    assert Path(from_file["path"]).read_bytes() == Path(cal["path"]).read_bytes()
    result = model.perplexity(Path(text_file), ctx=128, chunks=2, kv=cal["spec"])
    assert result.perplexity > 1 and result.kv_bytes < result.kv_fp16_bytes
    with pytest.raises(vq.SpecError, match="kivi"):
        model.calibrate(Path(text_file), kv="kivi", out=str(tmp_path / "kivi"))
    with pytest.raises(vq.Error, match="expected a spec without artifacts="):
        model.calibrate(Path(text_file), kv=cal["spec"], out=str(tmp_path / "again"))


def test_errors_carry_the_librarys_message(model, tmp_path):
    missing = tmp_path / "missing.gguf"
    with pytest.raises(vq.Error, match="missing.gguf"):
        vq.Model(missing)
    with pytest.raises(vq.Error, match="context of 128 needs at least 256"):
        model.perplexity("too short", ctx=128)
    with pytest.raises(vq.Error, match="cannot read the text file"):
        model.perplexity(tmp_path / "missing.txt")
    with pytest.raises(vq.SpecError, match="kbits"):
        model.generate(PROMPT, 4, kv="kivi:kbits=3")
    with pytest.raises(vq.Error, match="temperature"):
        model.generate(PROMPT, 4, temp=-1)
    with pytest.raises(vq.Error):
        model.logits([model.vocab + 5])


def test_a_saved_session_is_continued_without_evaluating_its_tokens_again(model, tmp_path):
    path = tmp_path / "prompt.vqs"
    first = model.generate(PROMPT, 0, kv="kivi", save_session=str(path))
    assert path.is_file() and first.reused_tokens == 0
    longer = PROMPT + " the rain came"
    fresh = model.generate(longer, 12, temp=0, kv="kivi")
    resumed = model.generate(longer, 12, temp=0, load_session=str(path))
    assert resumed.reused_tokens == first.prompt_tokens
    assert resumed.kv == fresh.kv  # the file's spec when kv is not given
    assert resumed.tokens == fresh.tokens
    as_saved = model.generate("", 12, temp=0, load_session=str(path))
    assert as_saved.tokens == model.generate(PROMPT, 12, temp=0, kv="kivi").tokens


def test_a_prompt_that_does_not_continue_the_session_is_refused(model, tmp_path):
    path = tmp_path / "prompt.vqs"
    model.generate(PROMPT, 0, save_session=str(path))
    with pytest.raises(vq.Error, match="does not continue session file"):
        model.generate("Something else entirely", 4, load_session=str(path))
    with pytest.raises(vq.Error, match="nosuch.vqs"):
        model.generate(PROMPT, 4, load_session=str(tmp_path / "nosuch.vqs"))


EVAL_SETTINGS = dict(ctx=128, chunks=2, retrieval=[64, 128], depths=[0.5], needle=8, trials=1,
                     decode_tokens=8)


def test_eval_measures_what_the_cli_measures(model, model_path, text_file, cli_path, tmp_path):
    ours = model.eval(text_file.read_text(), kv=["kivi"], recommend=50.0, **EVAL_SETTINGS)
    subprocess.run([cli_path, "eval", "-m", str(model_path), "-f", str(text_file), "--kv", "kivi",
                    "--ctx", "128", "--chunks", "2", "--retrieval", "64,128", "--depths", "0.5",
                    "--needle", "8", "--trials", "1", "--decode-tokens", "8", "--recommend", "50",
                    "--no-plots", "-t", "1", "--out", str(tmp_path)],
                   check=True, capture_output=True)
    theirs = json.loads((tmp_path / "results.json").read_text())
    assert [m["spec"] for m in ours["methods"]] == [m["spec"] for m in theirs["methods"]]
    assert ours["methods"][0]["spec"] == "fp16"
    for a, b in zip(ours["methods"], theirs["methods"]):
        for field in ("key_bytes", "value_bytes", "perplexity", "kl_mean", "top1_agreement",
                      "retrieval_mean"):
            assert a[field] == b[field], field
    assert ours["recommendation"] == theirs["recommendation"]


def test_eval_refuses_bad_settings_before_measuring(model, text_file):
    with pytest.raises(vq.SpecError, match="kbits=3"):
        model.eval(text_file.read_text(), kv=["kivi:kbits=3"], **EVAL_SETTINGS)
    with pytest.raises(vq.Error, match="ctx 100000 exceeds"):
        model.eval(text_file.read_text(), kv=["fp16"], ctx=100000)
