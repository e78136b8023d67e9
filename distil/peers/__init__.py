"""Peer rows: the tools a user would otherwise pick, trained on the same data and teacher as our students.

`student=peer-tfidf | peer-fasttext | peer-model2vec | peer-setfit` run them through `distil` like any
student (same labeled, transfer, dev and test splits, same cached teacher), so a frontier table can
put them beside ours. Each reads single texts and predicts class probabilities:

  tfidf      TF-IDF of word 1-2-grams + logistic regression (scikit-learn), C chosen on dev
  fasttext   fastText supervised (word 1-2-grams), 25 epochs, one thread (deterministic)
  model2vec  model2vec's static encoder and StaticModelForClassification, over the teacher's pre-trained
             model distilled as model2vec does (embedding_init=model2vec: the same steps, ours, since
             model2vec's `distill` extra pins transformers<5.4)
  setfit     SetFit (contrastive fine-tuning of the teacher's pre-trained sentence encoder + logistic
             regression), a few-label accuracy reference at the teacher's speed

`student.targets` says what they learn: `labels` (the labeled set alone, as each tool is used on its
own) or `teacher` (the labeled set with its gold labels plus the transfer set with the teacher's
argmax, the cheap way to distil into them). scikit-learn is a dependency; the others are the
`peers` extra (`pip install -e '.[peers]'`, which `make install` does).
"""

from __future__ import annotations

from distil.peers.base import PEERS, Peer, check_peer, check_peer_teacher, is_peer, load_peer

__all__ = ["PEERS", "Peer", "check_peer", "check_peer_teacher", "is_peer", "load_peer"]
