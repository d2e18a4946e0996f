"""Tokenizer speed: kerasbert ``encode_batch`` (Rust ``tokenizers``) against bert4keras ``Tokenizer.encode``.

Encodes N short synthetic Chinese and English sentences (generated here from a synthetic ~18k-token
vocabulary, no downloads) in interleaved rounds, checks that the ids are identical, and writes the
medians and ratios to ``benchmarks/RESULTS.md``.

Usage:
    python benchmarks/tokenizer_speed.py            # 100,000 sentences a language, 3 rounds
    python benchmarks/tokenizer_speed.py --quick    # 2,000 sentences a language, 5 rounds
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))


# bert4keras.tokenizers imports bert4keras.backend, hence TensorFlow: give it tf-keras. It is imported in
# main(), after kerasbert (whose Keras 3 must be imported first).
os.environ.update(TF_KERAS="1", TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")

import tokenizers  # noqa: E402

from benchmarks.results import write_section  # noqa: E402
from kerasbert.text.tokenizer import Tokenizer  # noqa: E402

CONSONANTS, VOWELS = "bcdfghjklmnprstvwz", "aeiou"
SYLLABLES = [c + v for c in CONSONANTS for v in VOWELS] + [c + v + "n" for c in CONSONANTS for v in VOWELS]


def synthetic_vocab(rng: random.Random) -> tuple[list[str], list[str], list[str]]:
    """A BERT-like vocabulary: specials, punctuation, 8,000 CJK characters, up to 12,000 words and 3,000 ## pieces."""
    chars = [chr(0x4E00 + i) for i in range(8000)]
    words = sorted({"".join(rng.choices(SYLLABLES, k=rng.randint(1, 3))) for _ in range(12000)})
    pieces = sorted({"##" + "".join(rng.choices(SYLLABLES, k=rng.randint(1, 2))) for _ in range(3000)})
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab = specials + list(".,!?;:'\"()-，。！？、：；") + list("0123456789") + chars + words + pieces
    return vocab, chars, words


def chinese_sentence(rng: random.Random, chars: list[str]) -> str:
    """15 to 60 characters, frequent characters favoured, with Chinese punctuation and the odd number."""
    out = []
    for _ in range(rng.randint(15, 60)):
        roll = rng.random()
        out.append("，" if roll < 0.06 else str(rng.randint(0, 99)) if roll < 0.08
                   else chars[int(rng.paretovariate(1.2)) % 3000])
    return "".join(out) + "。"


def english_sentence(rng: random.Random, words: list[str]) -> str:
    """8 to 20 words: vocabulary words, words that split into ## pieces, a few unknown, commas."""
    out = []
    for _ in range(rng.randint(8, 20)):
        roll = rng.random()
        word = rng.choice(words)
        if roll < 0.2:
            word += "".join(rng.choices(SYLLABLES, k=rng.randint(1, 2)))
        elif roll < 0.23:
            word = "x" + word + "q"
        out.append(word + ("," if rng.random() < 0.08 else ""))
    return " ".join(out).capitalize() + "."


def timed(fn: Callable[[], list]) -> tuple[float, list]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def bench_language(name: str, texts: list[str], ours: Tokenizer, theirs,
                   rounds: int, maxlen: int) -> dict:
    """Interleaved rounds of the three encoders on the same texts; medians in seconds."""
    runs = {
        "bert4keras encode (loop)": lambda: [theirs.encode(t, maxlen=maxlen)[0] for t in texts],
        "kerasbert encode_batch": lambda: ours.encode_batch(texts, maxlen=maxlen)[0],
        "kerasbert encode (loop)": lambda: [ours.encode(t, maxlen=maxlen)[0] for t in texts],
    }
    times: dict[str, list[float]] = {key: [] for key in runs}
    results = {}
    for _ in range(rounds):
        for key, fn in runs.items():
            seconds, results[key] = timed(fn)
            times[key].append(seconds)
    reference = results["bert4keras encode (loop)"]
    identical = all(results[key] == reference for key in runs)
    medians = {key: statistics.median(values) for key, values in times.items()}
    chars = sum(map(len, texts)) / len(texts)
    return {"name": name, "n": len(texts), "chars": chars, "medians": medians, "identical": identical}


def report(rows: list[dict], args: argparse.Namespace, vocab_size: int) -> str:
    lines = [
        "## Tokenizer speed: kerasbert vs bert4keras", "",
        f"`python benchmarks/tokenizer_speed.py{' --quick' if args.quick else ''}` — {args.n:,} synthetic sentences a "
        f"language, {args.rounds} interleaved rounds (medians), maxlen={args.maxlen}, vocabulary of "
        f"{vocab_size:,} tokens; {os.cpu_count()} CPU cores, Python {platform.python_version()}, "
        f"tokenizers {tokenizers.__version__}.", "",
        "| language | chars/sentence | encoder | sentences/s | × bert4keras | ids identical |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        base = row["medians"]["bert4keras encode (loop)"]
        for key, seconds in row["medians"].items():
            lines.append(f"| {row['name']} | {row['chars']:.0f} | {key} | {row['n'] / seconds:,.0f} | "
                         f"{base / seconds:.2f} | {'yes' if row['identical'] else 'NO'} |")
    lines += ["", "Goals: `encode_batch` ≥ 1.2 × bert4keras on Chinese, "
              "≥ 2.5 × on English, with identical ids.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 sentences, 5 rounds")
    parser.add_argument("--n", type=int, default=None, help="sentences a language (default 100,000)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--maxlen", type=int, default=128)
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    args = parser.parse_args()
    args.n = args.n or (2000 if args.quick else 100_000)
    args.rounds = args.rounds or (5 if args.quick else 3)
    from bert4keras.tokenizers import Tokenizer as Bert4kerasTokenizer

    rng = random.Random(0)
    vocab, chars, words = synthetic_vocab(rng)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "vocab.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(vocab) + "\n")
        ours, theirs = Tokenizer(path), Bert4kerasTokenizer(path, do_lower_case=True)
    rows = [bench_language("Chinese", [chinese_sentence(rng, chars) for _ in range(args.n)], ours, theirs,
                           args.rounds, args.maxlen),
            bench_language("English", [english_sentence(rng, words) for _ in range(args.n)], ours, theirs,
                           args.rounds, args.maxlen)]
    text = report(rows, args, len(vocab))
    write_section("tokenize", text, args.out)
    print(text)


if __name__ == "__main__":
    main()
