"""Generation speed: `kerasbert.generate`'s beam search against bert4keras's ``AutoRegressiveDecoder.beam_search``.

Three models (`MODELS`, ``--models``), each with random weights written once as a Google checkpoint that both
libraries load, float32 on the CPU: ``unilm``, a BERT-base-shaped UniLM (``application="unilm"``; H 768, L 12, the
Chinese vocabulary of 21,128 word pieces, whose MLM head each step pays for as a real model's does); ``gpt2``,
GPT-2 small's shape (``model="gpt2"``; H 768, L 12, V 50,257); ``t5``, T5.1.1 small's (``model="t5.1.1"``; H 512,
L 8 a stack, 6 heads of 64, V 32,128). Each input is a source of random ids (``[CLS] ... [SEP]``, lengths around
``--source``: the UniLM's and T5's source, GPT-2's prompt); each library decodes ``--max-length`` target tokens
with 3 beams and no end id, so every decode yields the same number of tokens:
- ``kerasbert``: ``generate(model, sources, "beam", beams=3)``, the sources of a batch decoded together (one
  prefill, then one cached step per token for every source and beam);
- ``bert4keras``: bert4keras 0.11.5 on tf-keras, its examples' decoders, one source at a time (a batch of 16 is 16
  decodes in turn, as bert4keras has no batched decoding): the UniLM's seq2seq decoder (``predict`` runs
  ``last_token(model).predict`` on the source and the ids so far, every step), GPT-2's article completion (the
  prompt and the ids so far), T5's title decoder (``encoder.predict`` once, then
  ``last_token(decoder).predict([c_encoded, output_ids])`` every step, ``start_id=0``).
Each library is a worker process of its own, warmed up (`worker_main`), then stepped in interleaved rounds
(one decode of the batch each, the order reversed every round). Tokens/s is target tokens (one sequence per
source, not per beam) over a round's seconds; "× bert4keras" is the median of the rounds' paired ratios, with
its 95 % interval (`bench.median_interval`, 6 rounds or more). Both libraries load the same weights, so their
ids are compared too.

With ``--portable`` the UniLM's decoder exported to ONNX (float32, and int8 by dynamic quantization) and to OpenVINO
(float32) runs too, searched by kerasbert's beam search in those runtimes
(`kerasbert.serving.portable_decoder`); with ``--bf16``, kerasbert's model under mixed_bfloat16.

Usage:
    python benchmarks/generate_bench.py            # the three models, batches 1 and 16, 5 rounds: RESULTS.md
    python benchmarks/generate_bench.py --quick    # tiny configs, batches 1 and 2, 2 rounds: checks that it runs
    python benchmarks/generate_bench.py --models t5,gpt2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for path in (ROOT, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

from bench import cpu_text, machine_kind, median_interval, shown_options, versions  # noqa: E402
from serve_bench import BASE, TINY  # noqa: E402  (BERT-base Chinese's shape; the tiny one)
from serve_bench import Worker as _ServeWorker  # noqa: E402

from benchmarks.results import write_section  # noqa: E402

VARIANTS = ("kerasbert", "bert4keras")
HALF = "kerasbert-bf16"  # with --bf16: kerasbert's model under mixed_bfloat16 (AMX or avx512_bf16 run it natively)
PORTABLE = ("kerasbert-onnx", "kerasbert-onnx-int8", "kerasbert-openvino")  # with --portable: exported decoders
BEAMS, TARGET = 3, 3.0  # the beam count; kerasbert's tokens/s over bert4keras's that the run checks
GPT2 = {**BASE, "vocab_size": 50257, "max_position_embeddings": 1024}  # GPT-2 small's shape, BERT's config keys
T5 = {"vocab_size": 32128, "hidden_size": 512, "num_hidden_layers": 8, "num_attention_heads": 6,
      "attention_head_size": 64, "intermediate_size": 1024, "hidden_act": ["gelu", "linear"],
      "hidden_dropout_prob": 0.1, "relative_attention_num_buckets": 32, "initializer_range": 0.02}  # T5.1.1 small
T5_TINY = {**T5, "vocab_size": 2000, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
           "attention_head_size": 16, "intermediate_size": 64}
SHAPES = {"unilm": "UniLM, BERT-base shape (L 12, H 768, V 21128)", "gpt2": "GPT-2 small's shape (L 12, H 768, "
          "V 50257)", "t5": "T5.1.1 small's shape (L 8 a stack, H 512, 6 heads of 64, V 32128)"}
# name: (the options both libraries build it with, its config, its --quick config)
MODELS = {"unilm": ({"application": "unilm"}, BASE, TINY), "gpt2": ({"model": "gpt2"}, GPT2, TINY),
          "t5": ({"model": "t5.1.1"}, T5, T5_TINY)}


def sources(n: int, length: int, vocab_size: int, seed: int = 0) -> list[list[int]]:
    """``n`` sources ``[CLS] ... [SEP]`` (ids 101 and 102 where the vocabulary has them), ``length`` ± 25 % long.

    Example:
    >>> [len(s) for s in sources(3, 8, 50)], sources(1, 4, 50)[0][0]
    ([8, 10, 9], 1)
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    cls, sep = (101, 102) if vocab_size > 200 else (1, 2)
    lengths = [length] + list(rng.integers(int(length * 0.75), int(length * 1.25) + 1, n - 1))
    return [[cls, *map(int, rng.integers(200 if vocab_size > 200 else 3, vocab_size, size - 2)), sep]
            for size in lengths]


def _std(path: str, shape: tuple, family: str) -> float:
    """σ of a random weight: 0.1; a T5's as T5 initializes its own (1/√fan-in, the token embedding and the output
    layer σ 1): its attention has no 1/√d, and at σ 0.1 its scores grow so large that float rounding, not the
    weights, picks its ids."""
    if not family.startswith(("t5", "mt5")):
        return 0.1
    return 1.0 if "Embedding-Token" in path or "Output-LM" in path or len(shape) < 2 else shape[0] ** -0.5


def prepare(folder: str, cfg: dict, options: dict) -> str:
    """A Google checkpoint of the model ``options`` build, random weights (`_std`; norms' γ 1), beside its
    bert_config.json."""
    import numpy as np

    from kerasbert import build_transformer_model, save_google_checkpoint

    config = os.path.join(folder, "bert_config.json")
    with open(config, "w") as f:
        json.dump(cfg, f)
    model, rng = build_transformer_model(config, verbose=False, **options), np.random.default_rng(0)
    for weight in model.weights:
        if "gamma" not in weight.path:
            std = _std(weight.path, tuple(weight.shape), options.get("model", "bert"))
            weight.assign(rng.normal(0.0, std, weight.shape).astype("float32"))
    return save_google_checkpoint(model, folder)


# ------------------------------------------------------------------------------------------- workers
def _kerasbert_decoder(job: dict, dtype: str | None = None):
    from kerasbert import build_transformer_model, generate

    model = build_transformer_model(job["config"], job["checkpoint"], verbose=False, dtype=dtype, **job["options"])
    return lambda batch, maxlen: [one.ids[0] for one in generate(model, batch, "beam", beams=BEAMS, max_length=maxlen,
                                                                 batch_size=len(batch))]


def _portable_decoder(job: dict, name: str):
    """The model's decoder written as ONNX (``-int8``: quantized) or OpenVINO, searched by kerasbert's beam search
    in its runtime (`kerasbert.serving.portable_decoder`)."""
    from kerasbert import build_transformer_model
    from kerasbert.generation.search import Rules, beam_search
    from kerasbert.serving.portable_decoder import PortableDecoder, write_decoder

    model = build_transformer_model(job["config"], job["checkpoint"], verbose=False, **job["options"])
    folder = tempfile.mkdtemp(prefix=f"{name}-")
    fmt = "openvino" if "openvino" in name else "onnx"
    decoder = PortableDecoder(folder, write_decoder(model, folder, fmt, int8=name.endswith("int8")))
    return lambda batch, maxlen: [one.ids[0] for one in beam_search(decoder, batch, BEAMS, Rules((), maxlen))]


def _bert4keras_decoder(job: dict):
    """bert4keras's decoder of ``job["model"]`` as its examples write it, one source after another."""
    from bert4keras.models import build_transformer_model

    if job["model"] == "t5":
        t5 = build_transformer_model(job["config"], job["checkpoint"], return_keras_model=False, **job["options"])
        return _bert4keras_t5(t5.encoder, t5.decoder)
    model = build_transformer_model(job["config"], job["checkpoint"], **job["options"])
    return _bert4keras_gpt2(model) if job["model"] == "gpt2" else _bert4keras_unilm(model)


def _bert4keras_unilm(model):
    import numpy as np
    from bert4keras.snippets import AutoRegressiveDecoder

    class Seq2Seq(AutoRegressiveDecoder):  # bert4keras's seq2seq examples (task_seq2seq_autotitle.py)
        @AutoRegressiveDecoder.wraps(default_rtype="probas")
        def predict(self, inputs, output_ids, states):
            token_ids, segment_ids = inputs
            token_ids = np.concatenate([token_ids, output_ids], 1)
            segment_ids = np.concatenate([segment_ids, np.ones_like(output_ids)], 1)
            return self.last_token(model).predict([token_ids, segment_ids], verbose=0)

    def decode(batch, maxlen):
        decoder = Seq2Seq(start_id=None, end_id=None, maxlen=maxlen)
        return [decoder.beam_search([source, [0] * len(source)], topk=BEAMS).tolist() for source in batch]

    return decode


def _bert4keras_gpt2(model):
    import numpy as np
    from bert4keras.snippets import AutoRegressiveDecoder

    class ArticleCompletion(AutoRegressiveDecoder):  # basic_language_model_gpt2_ml.py
        @AutoRegressiveDecoder.wraps(default_rtype="probas")
        def predict(self, inputs, output_ids, states):
            token_ids = np.concatenate([inputs[0], output_ids], 1)
            return self.last_token(model).predict(token_ids, verbose=0)

    def decode(batch, maxlen):
        decoder = ArticleCompletion(start_id=None, end_id=None, maxlen=maxlen)
        return [decoder.beam_search([source], topk=BEAMS).tolist() for source in batch]

    return decode


def _bert4keras_t5(encoder, decoder):
    import numpy as np
    from bert4keras.snippets import AutoRegressiveDecoder

    class AutoTitle(AutoRegressiveDecoder):  # task_seq2seq_autotitle_csl_mt5.py
        @AutoRegressiveDecoder.wraps(default_rtype="probas")
        def predict(self, inputs, output_ids, states):
            return self.last_token(decoder).predict([inputs[0], output_ids], verbose=0)

    def decode(batch, maxlen):
        title = AutoTitle(start_id=0, end_id=None, maxlen=maxlen)
        encoded = [encoder.predict(np.array([source]), verbose=0)[0] for source in batch]
        return [title.beam_search([c], topk=BEAMS)[1:].tolist() for c in encoded]  # without the start id

    return decode


def worker_main(name: str, job_path: str) -> None:
    """Build, warm up, then decode the first B sources per ``go B`` line on stdin. The warm-up: kerasbert decodes
    each batch once (its trace, and oneDNN's kernels for each batch's shapes), bert4keras one source for 2
    tokens (its predict function; it runs each call's shapes anew)."""
    with open(job_path) as f:
        job = json.load(f)
    if name in PORTABLE:
        decode = _portable_decoder(job, name)
        for batch in job["batches"]:
            decode(job["sources"][:batch], job["max_length"])
    elif name.startswith("kerasbert"):
        decode = _kerasbert_decoder(job, "mixed_bfloat16" if name == HALF else None)
        for batch in job["batches"]:
            decode(job["sources"][:batch], job["max_length"])
    else:
        decode = _bert4keras_decoder(job)
        decode(job["sources"][:1], 2)
    print("READY", flush=True)
    ids = {}
    for line in sys.stdin:
        if not line.startswith("go "):
            break
        batch = int(line.split()[1])
        start = time.perf_counter()
        ids[batch] = decode(job["sources"][:batch], job["max_length"])
        print(f"DONE {time.perf_counter() - start}", flush=True)
    print("RESULT " + json.dumps({"ids": ids}), flush=True)


class Worker(_ServeWorker):
    """A library's process (``serve_bench``'s protocol: READY, DONE, RESULT): ``decode(b)`` times one batch."""

    def __init__(self, name: str, job_path: str):
        super().__init__(name, job_path, script=__file__, env={"CUDA_VISIBLE_DEVICES": "-1"})  # float32 on the CPU

    def decode(self, batch: int) -> float:
        self.process.stdin.write(f"go {batch}\n")
        self.process.stdin.flush()
        return float(self._read("DONE "))


# ------------------------------------------------------------------------------------------- report
HEADER = ["| model | batch | variant | decode s (median) | tokens/s | × bert4keras (95 % interval) | same ids as "
          "bert4keras |", "|---|---|---|---|---|---|---|"]


def summarize(model: str, times: dict, results: dict, job: dict, variants: tuple) -> tuple[list[str], dict]:
    """``model``'s rows of the table and, per batch and kerasbert variant, its paired ratio to bert4keras with its
    interval."""
    rows, ratios = [], {}
    for batch in job["batches"]:
        theirs = results["bert4keras"]["ids"][str(batch)]
        for name in variants:
            seconds = statistics.median(times[(name, batch)])
            ratio, same = "1.00", "—"
            if name != "bert4keras":
                paired = [b / k for b, k in zip(times[("bert4keras", batch)], times[(name, batch)], strict=True)]
                interval = median_interval(paired)
                ratios[model, batch, name] = (statistics.median(paired), interval)
                ratio = f"**{ratios[model, batch, name][0]:.2f}**" + (f" ({interval[0]:.2f}–{interval[1]:.2f})"
                                                                    if interval else "")
                mine = results[name]["ids"][str(batch)]
                same = f"{sum(a == b for a, b in zip(mine, theirs, strict=True))} of {batch}"
            rows.append(f"| {model} | {batch} | {name} | {seconds:.3f} | {batch * job['max_length'] / seconds:.1f} | "
                        f"{ratio} | {same} |")
    return rows, ratios


def targets(ratios: dict) -> list[str]:
    """One line a model and batch: kerasbert's tokens/s ≥ `TARGET` × bert4keras's."""
    lines = []
    for (model, batch, name), (ratio, interval) in ratios.items():
        verdict = "met" if ratio >= TARGET else "missed"
        inside = interval is not None and interval[0] <= TARGET <= interval[1]
        lines.append(f"- {model}, batch {batch}, beam {BEAMS}: {name} {ratio:.2f} × bert4keras's tokens/s (target ≥ "
                     f"{TARGET} ×) — **{verdict}**" + (" (the target is inside the interval)" if inside else ""))
    return lines


def run(job: dict, job_path: str, rounds: int, variants: tuple = VARIANTS) -> tuple[dict, dict]:
    """The workers, ``rounds`` interleaved rounds per batch size: the seconds of each decode, and the ids."""
    workers = []
    for name in variants:  # one warm-up at a time: the exports' conversions each hold several copies of the model
        workers.append(Worker(name, job_path))
        workers[-1].ready()
    times: dict = {}
    for batch in job["batches"]:
        for r in range(rounds):
            for worker in workers if r % 2 == 0 else workers[::-1]:
                times.setdefault((worker.name, batch), []).append(worker.decode(batch))
            print(f"{job['model']} batch {batch} round {r + 1}/{rounds}: " + ", ".join(
                f"{name} {times[(name, batch)][-1]:.2f} s" for name in variants), flush=True)
    return times, {worker.name: worker.result() for worker in workers}


def measure(model: str, args: argparse.Namespace, batches: list[int], rounds: int) -> tuple[list[str], dict, dict]:
    """``model``'s checkpoint, workers and rounds: its rows of the table, its ratios, and its job."""
    options, full, tiny = MODELS[model]
    cfg, folder = tiny if args.quick else full, tempfile.mkdtemp(prefix=f"generate-bench-{model}-")
    job = {"model": model, "options": options, "config": os.path.join(folder, "bert_config.json"),
           "checkpoint": prepare(folder, cfg, options), "batches": batches,
           "max_length": args.max_length or (4 if args.quick else 32),
           "sources": sources(max(batches), args.source or (10 if args.quick else 64), cfg["vocab_size"])}
    job_path = os.path.join(folder, "job.json")
    with open(job_path, "w") as f:
        json.dump(job, f)
    portable = PORTABLE if args.portable and model == "unilm" else ()  # the exports take a UniLM or language model
    variants = (*VARIANTS, *((HALF,) if args.bf16 else ()), *portable)
    times, results = run(job, job_path, rounds, variants)
    return (*summarize(model, times, results, job, variants), job)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny configs, batches 1 and 2, 2 rounds")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)} "
                        "(default all)")
    parser.add_argument("--rounds", type=int, default=None, help="timed decodes per library and batch (default 5)")
    parser.add_argument("--batches", default=None, help="comma-separated batch sizes (default 1,16; quick 1,2)")
    parser.add_argument("--source", type=int, default=None, help="source length in word pieces (default 64)")
    parser.add_argument("--max-length", type=int, default=None, help="target tokens decoded (default 32)")
    parser.add_argument("--results", default=None, help="the markdown file to write (default RESULTS.md)")
    parser.add_argument("--bf16", action="store_true", help=f"also {HALF}: the model under mixed_bfloat16")
    parser.add_argument("--portable", action="store_true", help="also the UniLM's decoder exported to ONNX (float32 "
                        "and int8) and OpenVINO (float32), searched in those runtimes")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(args.worker, args.job)
    models = args.models.split(",")
    if not set(models) <= set(MODELS):
        parser.error(f"--models: expected some of {', '.join(MODELS)}, found {args.models}")
    batches = [int(b) for b in (args.batches or ("1,2" if args.quick else "1,16")).split(",")]
    rounds = args.rounds or (2 if args.quick else 5)
    rows, ratios = list(HEADER), {}
    for model in models:
        model_rows, model_ratios, job = measure(model, args, batches, rounds)
        rows, ratios = rows + model_rows, {**ratios, **model_ratios}
    shape = "tiny configs" if args.quick else ", ".join(SHAPES[model] for model in models)
    command = " ".join(["python benchmarks/generate_bench.py", *shown_options(sys.argv[1:] if argv is None else argv)])
    half = (f" ({HALF}: mixed_bfloat16)" if args.bf16 else "") + (
        "; the UniLM's exported decoders in ONNX Runtime (float32; int8: dynamic quantization of the weights) and "
        "OpenVINO (float32)" if args.portable else "")
    setting = (f"`{command}` — {shape}, random weights, float32{half}; sources of about "
               f"{len(job['sources'][0])} ids, {job['max_length']} target tokens, beam {BEAMS}, no end id; "
               f"{rounds} interleaved rounds. "
               f"{cpu_text()}, {multiprocessing.cpu_count()} cores; {versions()}.")
    title = f"## Generation speed{' (quick)' if args.quick else ''}: kerasbert.generate vs bert4keras"
    text = "\n".join([title, "", setting, "", *rows, "", *targets(ratios)])
    kind = "quick" if args.quick else machine_kind("cpu")
    write_section(f"generate-{kind}", text, **({"path": args.results} if args.results else {}))
    print(text)

if __name__ == "__main__":
    main()
