"""The search agent at inference time: generation backends, rollout loops per method, judge clients. No Django;
importing agent must not import torch until a model is used."""
