"""HfTokenizer (a Hugging Face tokenizer.json) against the tokenizers library's own encode, BERT's Tokenizer on the
same WordPiece vocabulary, and the padding id everywhere rows of its ids are padded."""

from __future__ import annotations

import os

import numpy as np
import pytest
from tokenizers import Tokenizer as RustTokenizer
from tokenizers import models, normalizers, pre_tokenizers, trainers

from kerasbert.errors import ConfigError
from kerasbert.modeling.config import BertConfig
from kerasbert.text.hf_tokenizer import HfTokenizer
from kerasbert.text.tokenizer import Tokenizer, _pair_lengths
from kerasbert.text.tokenizer_base import pad_id_of, pad_ids
from kerasbert.text.tokenizer_files import check_family, load_tokenizer, vocabulary_file

import hf_tokenizer_files as files

KINDS = ("roberta_bpe", "roberta_processing", "xlm_roberta_unigram", "deberta_unigram", "wordpiece")
SENTENCES = files.mixed_sentences(1000, seed=2024)
PAD = {"roberta_bpe": 1, "roberta_processing": 1, "xlm_roberta_unigram": 1, "deberta_unigram": 0, "wordpiece": 0}


def _wordpiece_vocab() -> list[str]:
    """A WordPiece vocabulary trained by tokenizers on the mixed corpus (ids in order)."""
    rust = RustTokenizer(models.WordPiece(unk_token="[UNK]"))
    rust.normalizer = normalizers.BertNormalizer(lowercase=True)
    rust.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    rust.train_from_iterator(files.mixed_sentences(600, seed=123), trainers.WordPieceTrainer(
        vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    return [token for token, _ in sorted(rust.get_vocab().items(), key=lambda item: item[1])]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hf_tokenizers")
    vocab = _wordpiece_vocab()
    out = {"roberta_bpe": files.write_bpe(str(root / "bpe")),
           "roberta_processing": files.write_bpe(str(root / "bpe_processing"), roberta_processing=True),
           "xlm_roberta_unigram": files.write_unigram(str(root / "xlmr")),
           "deberta_unigram": files.write_unigram(str(root / "deberta"), layout="deberta"),
           "wordpiece": files.write_wordpiece(str(root / "wordpiece"), vocab)}
    with open(os.path.join(out["wordpiece"], "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab))
    return out


def _pair(folders, kind) -> tuple[HfTokenizer, RustTokenizer]:
    path = os.path.join(folders[kind], "tokenizer.json")
    return HfTokenizer(path), RustTokenizer.from_file(path)


@pytest.mark.parametrize("kind", KINDS)
def test_ids_segments_and_offsets_are_the_tokenizers_own(folders, kind):
    ours, theirs = _pair(folders, kind)
    batch_ids, batch_segments = ours.encode_batch(SENTENCES)
    rows = zip(SENTENCES, batch_ids, batch_segments, ours.offsets(SENTENCES), ours.piece_offsets(SENTENCES),
               strict=True)
    for text, ids, segments, (piece_ids, offsets), (_, trimmed) in rows:
        encoding = theirs.encode(text)
        assert ours.encode(text) == (encoding.ids, encoding.type_ids), text
        assert (ids, segments) == (encoding.ids, encoding.type_ids), text
        kept = [i for i, sequence in enumerate(encoding.sequence_ids) if sequence is not None]
        assert piece_ids == [encoding.ids[i] for i in kept]
        assert offsets == [encoding.offsets[i] for i in kept], text  # characters of the text itself
        assert ours.tokenize(text) == encoding.tokens
        for (start, end), (a, b) in zip(offsets, trimmed, strict=True):  # the same characters, whitespace aside
            assert text[a:b] == text[start:end].strip() and start <= a <= b <= end


@pytest.mark.parametrize("kind", KINDS)
def test_pairs_are_the_post_processors_rows(folders, kind):
    ours, theirs = _pair(folders, kind)
    firsts, seconds = SENTENCES[:500], SENTENCES[500:]
    batch = ours.encode_batch(firsts, seconds)
    for first, second, ids, segments in zip(firsts, seconds, *batch, strict=True):
        encoding = theirs.encode(first, second)
        assert ours.encode(first, second) == (encoding.ids, encoding.type_ids)
        assert (ids, segments) == (encoding.ids, encoding.type_ids)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("maxlen", [6, 9, 17])
def test_truncation_keeps_the_specials_and_cuts_the_longer_text(folders, kind, maxlen):
    ours, theirs = _pair(folders, kind)
    firsts, seconds = SENTENCES[:200], SENTENCES[200:400]
    untruncated = ours.encode_batch(firsts, seconds)
    for first, second, ids, segments in zip(firsts, seconds, *untruncated, strict=True):
        a, b = (theirs.encode(text, add_special_tokens=False) for text in (first, second))
        kept = _pair_lengths(len(a.ids), len(b.ids), maxlen - (len(theirs.encode("", "").ids)))
        a.truncate(kept[0])
        b.truncate(kept[1])
        expected = theirs.post_process(a, b)
        assert ours.encode(first, second, maxlen=maxlen) == (expected.ids, expected.type_ids)
        assert len(expected.ids) <= maxlen
        assert ours.truncate(ids, segments, maxlen) == (expected.ids, expected.type_ids)
        single = theirs.encode(first, add_special_tokens=False)
        single.truncate(maxlen - len(theirs.encode("").ids))
        assert ours.encode(first, maxlen=maxlen)[0] == theirs.post_process(single).ids


def test_a_wordpiece_tokenizer_json_gives_berts_tokenizer_ids(folders):
    ours = HfTokenizer(folders["wordpiece"])
    bert = Tokenizer(os.path.join(folders["wordpiece"], "vocab.txt"), do_lower_case=True)
    texts = [text.replace("Σ", "S") for text in SENTENCES]  # Python lower-cases a final sigma to ς, Rust to σ
    for maxlen in (None, 5, 9, 17):
        assert ours.encode_batch(texts[:500], texts[500:], maxlen=maxlen) == bert.encode_batch(
            texts[:500], texts[500:], maxlen=maxlen)
        assert [ours.encode(text, maxlen=maxlen) for text in texts[:200]] == [
            bert.encode(text, maxlen=maxlen) for text in texts[:200]]
    assert [ours.token_to_id(token) for token in ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")] == [
        bert.token_to_id(token) for token in ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")]


@pytest.mark.parametrize("kind", KINDS)
def test_decode_is_the_tokenizers_decode(folders, kind):
    ours, theirs = _pair(folders, kind)
    for text in SENTENCES[:300]:
        ids = theirs.encode(text).ids
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize("kind", ["roberta_bpe", "xlm_roberta_unigram", "deberta_unigram"])
def test_special_ids_and_bert_names(folders, kind):
    ours, theirs = _pair(folders, kind)
    names = ("<s>", "</s>", "<pad>", "<mask>", "<unk>") if kind != "deberta_unigram" else (
        "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]")
    expected = [theirs.token_to_id(name) for name in names]
    assert [ours._token_start_id, ours._token_end_id, ours._token_pad_id, ours._token_mask_id,
            ours._token_unk_id] == expected
    assert ours.tokens_to_ids(["[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"]) == expected
    assert ours.pad_id == pad_id_of(ours) == PAD[kind]
    assert ours.ids_to_tokens(expected) == list(names)
    assert ours.vocab_size == theirs.get_vocab_size()


@pytest.mark.parametrize("kind", KINDS)
def test_words_and_their_pieces(folders, kind):
    ours, theirs = _pair(folders, kind)
    for text in SENTENCES[:200]:
        words = ours.split_words(text)
        assert all(text[a:b] == text[a:b].strip() and b > a for a, b in words)
        assert all(b1 <= a2 for (_, b1), (a2, _) in zip(words, words[1:], strict=False))
        pieces = ours.encode_words([[text[a:b] for a, b in words]])[0]
        assert len(pieces) == len(words) and all(pieces)
        joined = " ".join(text[a:b] for a, b in words)
        found = [index for word in pieces for index in word]
        assert found == theirs.encode(joined, add_special_tokens=False).ids or any(
            word == [ours._token_unk_id] for word in pieces)
        assert ours.rematch(text, ours.tokenize(text))[1:-1] == [
            list(range(a, b)) for a, b in ours.piece_offsets([text])[0][1]]


@pytest.mark.parametrize("kind", KINDS)
def test_encode_batch_pads_with_the_tokenizers_pad_id(folders, kind):
    ours = HfTokenizer(folders[kind])
    ids, segments = ours.encode_batch(SENTENCES[:20], padding=True)
    lengths = [len(row) for row in ours.encode_batch(SENTENCES[:20])[0]]
    for row, segment_row, length in zip(ids, segments, lengths, strict=True):
        assert (row[length:] == PAD[kind]).all() and (segment_row[length:] == 0).all()
    ids, _ = ours.encode_batch(SENTENCES[:3], maxlen=40, padding="max_length")
    assert ids.shape == (3, 40)
    np.testing.assert_array_equal(pad_ids([[5], [5, 6]], pad_id=PAD[kind]), [[5, PAD[kind]], [5, 6]])


def test_a_pipeline_batch_pads_tokens_with_the_pad_id_and_segments_with_0(folders):
    from kerasbert.finetune.tasks import get_task
    from kerasbert.text.pipeline import length_buckets, to_dataset
    from kerasbert.text.readers import ClassificationExample, LabelSet

    tokenizer = load_tokenizer(folders["roberta_bpe"])
    examples = [ClassificationExample(text, "x" if i % 2 else "y") for i, text in enumerate(SENTENCES[:16])]
    features = get_task("cls").encoded(tokenizer, examples, LabelSet(["x", "y"]), 64, "data")
    assert features.pad_id == 1
    lengths = [len(row) for row in features.token_ids]
    for dataset in (to_dataset(features, 16), length_buckets(to_dataset(features, 16), 64, pad_id=1)):
        inputs, labels = next(iter(dataset))
        tokens, segments = inputs["Input-Token"].numpy(), inputs["Input-Segment"].numpy()
        assert tokens.shape[1] >= max(lengths)
        for row, segment_row, length in zip(tokens, segments, lengths, strict=True):
            assert (row[length:] == 1).all() and (row[:length] != 1).all()
            assert (segment_row == 0).all()
        assert sorted(labels.numpy().tolist()) == [0] * 8 + [1] * 8


def test_a_tokenizer_of_another_family_is_one_clear_error(folders):
    bpe = os.path.join(folders["roberta_bpe"], "tokenizer.json")
    with pytest.raises(ConfigError) as error:
        load_tokenizer(folders["roberta_bpe"], family="xlm_roberta")
    assert str(error.value).startswith(f"{bpe}: expected a unigram tokenizer, xlm_roberta's")
    assert "found a bpe tokenizer (model.type 'bpe')" in str(error.value)
    with pytest.raises(ConfigError, match="expected a wordpiece tokenizer, bert's .*found a unigram tokenizer"):
        load_tokenizer(folders["deberta_unigram"], family="bert")
    config = BertConfig.from_preset("tiny").replace(vocab_size=100, extra={"pad_token_id": 1})
    with pytest.raises(ConfigError, match="expected at most 100 tokens, the vocab_size of the config, found 400"):
        load_tokenizer(folders["roberta_bpe"], family="roberta_en", config=config)
    wrong_pad = config.replace(vocab_size=512, extra={"pad_token_id": 0})
    with pytest.raises(ConfigError, match="the padding id 0 the model masks .* token '<pad>' of id 1"):
        check_family(HfTokenizer(bpe), "roberta_en", wrong_pad, bpe)
    assert isinstance(load_tokenizer(folders["roberta_bpe"], "roberta_en", config=config.replace(vocab_size=512)),
                      HfTokenizer)


def test_a_folder_gives_its_vocab_txt_first_then_its_tokenizer_json(folders, tmp_path):
    assert vocabulary_file(folders["wordpiece"]).endswith("vocab.txt")
    assert isinstance(load_tokenizer(folders["wordpiece"]), Tokenizer)
    assert isinstance(load_tokenizer(os.path.join(folders["wordpiece"], "tokenizer.json")), HfTokenizer)
    assert isinstance(load_tokenizer(folders["xlm_roberta_unigram"]), HfTokenizer)
    with pytest.raises(ConfigError, match="expected a folder with vocab.txt or tokenizer.json, found neither"):
        load_tokenizer(str(tmp_path))
    with pytest.raises(ConfigError, match="--pre-tokenize"):
        load_tokenizer(folders["roberta_bpe"], pre_tokenize=str.split)
    (tmp_path / "tokenizer.json").write_text("{\"model\": 3}")
    with pytest.raises(ConfigError, match="tokenizer.json: expected a tokenizer.json the tokenizers library reads"):
        HfTokenizer(str(tmp_path))


@pytest.mark.parametrize("kind", KINDS)
def test_span_and_qa_rows_read_words_on_their_pieces(folders, kind):
    from kerasbert.text.qa_data import QaExample, encode_qa
    from kerasbert.text.readers import LabelSet
    from kerasbert.text.span_data import SpanExample, encode_spans

    tokenizer = HfTokenizer(folders[kind])
    text = "hello Москва café"
    features = encode_spans(tokenizer, [SpanExample(text, [(6, 12, "LOC")])], LabelSet(["LOC"]), maxlen=24)
    assert features.dropped["boundaries"] == 0  # "▁Москва" spans the word, not the space before it
    assert all(text[a:b] == text[a:b].strip() for a, b in features.offsets[0])
    qa = encode_qa(tokenizer, [QaExample("where?", text, [(6, 12)])], maxlen=24, labels=True)
    (ids, segments, start), = [tokenizer.pair_row(tokenizer.piece_offsets(["where?"])[0][0],
                                                  tokenizer.piece_offsets([text])[0][0])]
    assert (qa.token_ids, qa.segment_ids, qa.context_starts) == ([ids], [segments], [start])
    assert len(qa.labels[0]) == len(ids) and qa.unplaced == 0
