"""Scaling out: ``tf.distribute`` input functions, tf.data service servers, Apache Beam runs."""
