"""The ``kerasbert`` console script.

Each subcommand is two small functions, one that adds its arguments to a parser and one that
runs it and returns the exit status, listed once in ``COMMANDS``; adding ``train`` or ``predict``
means writing that pair and one ``COMMANDS`` entry. A :class:`~kerasbert.errors.KerasBertError`
prints its one-line message to stderr and exits 2; ``--debug`` shows the traceback instead.

Example:
>>> main(["summary", "tiny", "--head", "cls:2", "--format", "json"])  # doctest: +ELLIPSIS
{
  "model": "bert-cls",
...
0

From a shell: ``kerasbert summary bert_base_chinese --head cls:2 --batch 32 --seq 128``.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import traceback
from collections.abc import Callable, Sequence

from kerasbert.errors import KerasBertError, ModelError, fail

HEAD_SPECS = "cls:N, tagging:K, tagging:K:crf, mlm or nsp"


@dataclasses.dataclass(frozen=True)
class Command:
    """One subcommand: its help line, how it adds its arguments, and how it runs."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# ------------------------------------------------------------------------------------------- summary
def _summary_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="a bert_config.json path or a preset name (tiny, bert_base_chinese, ...)")
    parser.add_argument("--head", help=f"attach a head: {HEAD_SPECS}")
    parser.add_argument("--pooler", action="store_true", help="build the backbone with Pooler/Pooler-Dense")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    parser.add_argument("--batch", type=int, help="batch size of the activation-memory estimate")
    parser.add_argument("--seq", type=int, help="sequence length of the activation-memory estimate")
    parser.add_argument("--expand", action="store_true", help="one row per weight (qkv_kernel, qkv_bias, ...)")


def parse_head(spec: str) -> Callable:
    """``"cls:2"`` -> a function ``backbone -> keras.Model`` that attaches that head with kerasbert.heads.

    A ``cls`` head on a backbone built with ``--pooler`` classifies from ``Pooler-Dense``
    (``pooling="pooler"``); otherwise from ``CLS-token`` (``x[:, 0]``).

    Example:
    >>> parse_head("tagging:11:crf").__name__
    'tagging:11:crf'
    """
    from kerasbert import heads

    match = re.fullmatch(r"(cls|tagging):([1-9][0-9]*)(:crf)?|mlm|nsp", spec or "")
    if not match or (match.group(3) and match.group(1) != "tagging"):
        raise fail(ModelError, "--head", HEAD_SPECS, repr(spec), "e.g. --head cls:2 or --head tagging:9:crf")
    kind, size, crf = match.group(1) or spec, match.group(2), bool(match.group(3))

    def attach(backbone):
        if kind == "cls":
            pooled = any(layer.name == "Pooler-Dense" for layer in backbone.layers)
            return heads.cls(backbone, int(size), pooling="pooler" if pooled else "first")
        if kind == "tagging":
            return heads.tagging(backbone, int(size), crf=crf)
        return getattr(heads, kind)(backbone)

    attach.__name__ = spec
    return attach


def _run_summary(args: argparse.Namespace) -> int:
    from kerasbert.models import build_transformer_model
    from kerasbert.summary import summary

    attach = parse_head(args.head) if args.head else None  # a bad spec fails before the slow build
    model = build_transformer_model(args.config, with_pool=args.pooler, verbose=False)
    if attach is not None:
        model = attach(model)
    summary(model, expand=args.expand, batch_size=args.batch, seq_len=args.seq, format=args.format,
            print_fn=print)  # the CLI's result goes to stdout
    return 0


COMMANDS: dict[str, Command] = {
    "summary": Command("annotated parameter summary of a model built from a config (no weights loaded)",
                       _summary_arguments, _run_summary),
}


# ------------------------------------------------------------------------------------------- entry point
def build_parser() -> argparse.ArgumentParser:
    """The ``kerasbert`` parser with one subparser per entry of ``COMMANDS``."""
    parser = argparse.ArgumentParser(prog="kerasbert", description="BERT in Keras 3 the bert4keras way.")
    parser.add_argument("--debug", action="store_true", help="show the full traceback on errors")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        sub = subparsers.add_parser(name, help=command.help, description=command.help)
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        command.add_arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kerasbert COMMAND ...``; returns the exit status (0, or 2 for a usage or kerasbert error).

    Args:
        argv: list of str. the arguments after the program name; ``sys.argv[1:]`` when None.

    Example:
    >>> main(["summary", "tiny", "--head", "bad"])
    2
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit:  # argparse exits on --help and on usage errors
        return int(exit.code or 0)
    try:
        return COMMANDS[args.command].run(args)
    except KerasBertError as error:
        if args.debug:
            traceback.print_exc()
        print(f"kerasbert {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
