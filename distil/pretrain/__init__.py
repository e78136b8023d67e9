"""Masked-LM pre-training of compact Transformer students (Turc et al. 2019, Pre-trained Distillation)."""
