"""Loading what is checked: a module's function (modules.py), a Keras model (keras.py), a
SavedModel or .keras file (saved_files.py names its files, saved_models.py loads them), and
the names of f's arguments and results. Only keras.py and saved_models.py use TensorFlow;
this file imports nothing."""
