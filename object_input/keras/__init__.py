"""The Keras edge: layouts of examples and batches for Keras 3 and KerasHub, the device-stage layer,
callbacks."""
