"""Tests for tpu_estimator_compat._tf.estimator_seam: the TF 2.15 names the real package needs."""
import sys

from tensorflow.python.util import tf_export

from tpu_estimator_compat._tf import estimator_seam


def test_install_adds_the_api_name_and_estimator_training_idempotently():
    estimator_seam.install()
    estimator_seam.install()
    name = tf_export.ESTIMATOR_API_NAME
    assert name == "estimator"
    assert tf_export.API_ATTRS[name].names == "_estimator_api_names"
    assert tf_export.API_ATTRS_V1[name].names == "_estimator_api_names_v1"
    assert estimator_seam.ESTIMATOR_TRAINING in sys.modules
    # The real package's decorator works with it: the export names land on the symbol.
    def f():
        pass
    tf_export.api_export("estimator.f", api_name=name, v1=["estimator.f"])(f)
    assert f._estimator_api_names == ("estimator.f",)


def test_api_gauges_are_made_once_with_legacy_kinds():
    api, canned = estimator_seam.api_gauges()
    assert estimator_seam.api_gauges() == (api, canned)
    canned.get_cell("Classifier").set("DNN")
    assert canned.get_cell("Classifier").value() == "DNN"
    api.get_cell("init").set(True)
    assert api.get_cell("init").value() is True
