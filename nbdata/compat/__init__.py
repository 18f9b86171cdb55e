"""TensorFlow-compatible namespaces: ``import nbdata.compat.v1 as tf`` runs TF1 input-pipeline programs."""
