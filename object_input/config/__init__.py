"""Configuration adapters: a pipeline.config, a YAML file or a Caffe prototxt as ``make_dataset``
settings."""
