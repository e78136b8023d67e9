"""Classification of a pair of texts (paraphrase, inference): the teacher reads them joined,
siamese students read each alone."""

from __future__ import annotations

from distil.tasks.classification import ClassificationTask


class PairTask(ClassificationTask):
    name = "pair"
    inputs = "pair"
