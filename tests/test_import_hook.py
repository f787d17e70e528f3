"""Tests for tpu_estimator_compat.legacy.import_hook: legacy module paths served as real modules.

Every import form here was seen in a public code base (table in migration_guide/launcher.md).
In-process tests import through the plain import system after `install_aliases()` and
through TF1 mode's import function; the launcher tests run a script of those forms unchanged
as `python -m tpu_estimator_compat.run`, with TF1 mode on and off.
"""
import glob
import os
import subprocess
import sys
import textwrap
import types

import pytest
import tensorflow as tf
import tf_keras
import tf_slim
import tf_slim.nets.inception
import tf_slim.nets.inception_v3
from tf_slim.training import evaluation as slim_evaluation

import tpu_estimator_compat
from tpu_estimator_compat.legacy import namespaces
from tpu_estimator_compat.cluster import tpu_resolver
from tpu_estimator_compat.contrib import image as contrib_image
from tpu_estimator_compat.legacy import contrib_standins
from tpu_estimator_compat.contrib import lookup as contrib_lookup
from tpu_estimator_compat.export import saved_model as export_lib
from tpu_estimator_compat.contrib import hparams as hparams_lib
from tpu_estimator_compat.api import estimator as estimator_lib
from tpu_estimator_compat.legacy import estimator_map
from tpu_estimator_compat.legacy import import_hook as legacy_imports
from tpu_estimator_compat.legacy import tf1_mode
from tpu_estimator_compat.api import train_and_eval as training

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SCRIPT = os.path.join(HERE, "scripts", "legacy_imports", "import_forms.py")
TIMEOUT_S = 420


@pytest.fixture(scope="module", autouse=True)
def installed():
    tpu_estimator_compat.install_aliases()


def _exec(source, builtins_dict=None):
    namespace = {"__name__": "user_code"}
    if builtins_dict is not None:
        namespace["__builtins__"] = builtins_dict
    exec(compile(textwrap.dedent(source), "<user>", "exec"), namespace)  # noqa: S102
    return namespace


# The core modules TF 1.14+'s `tensorflow/contrib/tpu/python/{tpu,ops}` stubs re-exported.
from tensorflow.python.tpu import tpu_feed as core_tpu_feed  # noqa: E402  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.tpu import tpu_function as core_tpu_function  # noqa: E402  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.tpu import training_loop as core_training_loop  # noqa: E402  # pylint: disable=g-direct-tensorflow-import
from tensorflow.python.tpu.ops import tpu_ops as core_tpu_ops  # noqa: E402  # pylint: disable=g-direct-tensorflow-import

# (import statement, name it binds, what that must be)
_T = tpu_estimator_compat
_FORMS = [
    ("from tensorflow.contrib import tpu as m", "m.TPUEstimator", _T.TPUEstimator),
    ("from tensorflow.contrib import cluster_resolver as m", "m.TPUClusterResolver",
     tpu_resolver.TPUClusterResolver),
    ("from tensorflow.contrib import layers as m", "m.layer_norm", tf_slim.layer_norm),
    ("from tensorflow.contrib import slim as m", "m", tf_slim),
    ("from tensorflow.contrib import framework as m", "m.arg_scope", tf_slim.arg_scope),
    # tensorflow/tpu show_and_tell (`contrib_rnn`, `contrib_stateless`, `contrib_estimator`).
    ("from tensorflow.contrib import rnn as m", "m.BasicLSTMCell",
     tf.compat.v1.nn.rnn_cell.BasicLSTMCell),
    ("from tensorflow.contrib import stateless as m", "m.stateless_random_normal",
     tf.random.stateless_normal),
    # tensorflow/tpu QANet (`contrib_lookup.index_table_from_tensor`).
    ("from tensorflow.contrib import lookup as m", "m.index_table_from_tensor",
     contrib_lookup.index_table_from_tensor),
    ("from tensorflow.contrib import estimator as m", "m.clip_gradients_by_norm",
     contrib_standins.clip_gradients_by_norm),
    # RandAugment / AutoAugment (tensorflow/tpu efficientnet and detection, and
    # noisystudent `randaugment.py`: `contrib_image.rotate`, `translate`, `transform`).
    ("from tensorflow.contrib import image as m", "m.rotate", contrib_image.rotate),
    ("from tensorflow.contrib.image.python.ops import image_ops as m", "m.transform",
     contrib_image.transform),
    # tensorflow/tpu cifar_keras.py (`contrib_keras.layers` in model_fn); research code.
    ("from tensorflow.contrib import keras as m", "m.layers.Conv2D", tf_keras.layers.Conv2D),
    ("from tensorflow.contrib.keras import layers, models, backend as K\nm = layers",
     "(m.Dense, models.Model, K.floatx)",
     (tf_keras.layers.Dense, tf_keras.Model, tf_keras.backend.floatx)),
    ("from tensorflow.contrib.keras.api.keras.models import Sequential as m", "m",
     tf_keras.Sequential),
    ("from tensorflow.contrib.keras.api.keras.applications.vgg19 import VGG19 as m", "m",
     tf_keras.applications.vgg19.VGG19),
    ("from tensorflow.contrib.keras.python.keras.layers import Dense as m", "m",
     tf_keras.layers.Dense),
    ("import tensorflow.contrib.tpu as m", "m.TPUConfig", _T.TPUConfig),
    ("import tensorflow.contrib.cluster_resolver\nm = tensorflow.contrib.cluster_resolver",
     "m.TPUClusterResolver", tpu_resolver.TPUClusterResolver),
    ("import tensorflow.contrib.layers as m", "m.fully_connected", tf_slim.fully_connected),
    ("from tensorflow.contrib.tpu.python.tpu import tpu_estimator as m", "m.TPUEstimatorSpec",
     _T.TPUEstimatorSpec),
    ("from tensorflow.contrib.tpu.python.tpu import tpu_config as m", "m.RunConfig",
     _T.RunConfig),
    ("from tensorflow.contrib.tpu.python.tpu import tpu as m", "m.CrossShardOptimizer",
     tf.compat.v1.tpu.CrossShardOptimizer),
    ("from tensorflow.contrib.tpu.python.tpu import bfloat16 as m", "m.bfloat16_scope",
     tf.compat.v1.tpu.bfloat16_scope),
    # TF 1.14+ contrib stubs of core TPU modules (google/compare_gan `arch_ops.py`,
    # `tpu_ops.py`: `tpu_function.get_tpu_context().number_of_shards`).
    ("from tensorflow.contrib.tpu.python.tpu import tpu_function as m", "m.get_tpu_context",
     core_tpu_function.get_tpu_context),
    ("from tensorflow.contrib.tpu.python.tpu import tpu_feed as m", "m.InfeedQueue",
     core_tpu_feed.InfeedQueue),
    ("from tensorflow.contrib.tpu.python.tpu import training_loop as m", "m.repeat",
     core_training_loop.repeat),
    ("from tensorflow.contrib.tpu.python.ops import tpu_ops as m", "m.infeed_dequeue",
     core_tpu_ops.infeed_dequeue),
    # Whatever tf.compat.v1.tpu holds when it is used: TPUEstimator maps it onto the strategy.
    ("from tensorflow.contrib.tpu.python.ops import tpu_ops as m", "m.cross_replica_sum",
     lambda: tf.compat.v1.tpu.cross_replica_sum),
    ("from tensorflow.contrib.framework.python.ops import arg_scope as m", "m",
     tf_slim.arg_scope),
    ("from tensorflow.contrib.framework.python.ops import add_arg_scope as m", "m",
     tf_slim.add_arg_scope),
    ("from tensorflow.contrib.layers.python.layers import layers as m", "m.conv2d",
     tf_slim.conv2d),
    ("from tensorflow.contrib.layers.python.layers import initializers as m",
     "m.xavier_initializer", tf_slim.xavier_initializer),
    ("from tensorflow.contrib.layers.python.layers import regularizers as m",
     "m.l2_regularizer", tf_slim.l2_regularizer),
    # tensorflow/tpu retinanet, amoeba_net, efficientnet autoaugment; GPT-2; UDA (attribute).
    ("from tensorflow.contrib import training as m", "m.HParams", hparams_lib.HParams),
    ("from tensorflow.contrib.training import HParams as m", "m", hparams_lib.HParams),
    # Cloud ML Engine samples: `hparam.HParams(**args.__dict__)`.
    ("from tensorflow.contrib.training.python.training import hparam as m", "m.HParams",
     hparams_lib.HParams),
    ("from tensorflow.contrib.training.python.training import hparam as m", "m.parse_values",
     hparams_lib.parse_values),
    ("from tensorflow.contrib.training.python.training import evaluation as m",
     "m.checkpoints_iterator", slim_evaluation.checkpoints_iterator),
    ("from tensorflow.contrib.slim.nets import inception as m", "m.inception_v3",
     tf_slim.nets.inception.inception_v3),
    ("from tensorflow.contrib.slim.python.slim.nets.inception_v3 import inception_v3_base as m",
     "m", tf_slim.nets.inception_v3.inception_v3_base),
    ("from tensorflow.python.estimator import estimator as m",
     "m._load_global_step_from_checkpoint_dir",
     legacy_imports._load_global_step_from_checkpoint_dir),
    ("from tensorflow.python.estimator import model_fn as m", "m.EstimatorSpec",
     _T.EstimatorSpec),
    ("from tensorflow.python.estimator import run_config as m", "m.RunConfig", _T.config.EstimatorRunConfig),
    ("import tensorflow_estimator as m", "m.estimator.tpu.TPUEstimator", _T.TPUEstimator),
    ("import tensorflow_estimator as m", "m.estimator.EstimatorSpec", _T.EstimatorSpec),
    ("from tensorflow_estimator.python.estimator.tpu import tpu_estimator as m",
     "m.TPUEstimator", _T.TPUEstimator),
    ("from tensorflow_estimator.python.estimator.tpu import tpu_config as m", "m.TPUConfig",
     _T.TPUConfig),
    ("from tensorflow_estimator.python.estimator import estimator as m",
     "m._load_global_step_from_checkpoint_dir",
     legacy_imports._load_global_step_from_checkpoint_dir),
    ("from tensorflow_estimator.python.estimator import run_config as m", "m.RunConfig",
     _T.config.EstimatorRunConfig),
    ("from tensorflow_estimator.python.estimator import training as m", "m.train_and_evaluate",
     _T.train_and_evaluate),
    ("from tensorflow_estimator.python.estimator import model_fn as m", "m.EstimatorSpec",
     _T.EstimatorSpec),
    ("from tensorflow_estimator.python.estimator import mode_keys as m", "m.ModeKeys",
     _T.ModeKeys),
    ("from tensorflow_estimator.python.estimator import exporter as m", "m.Exporter",
     training.Exporter),
    ("from tensorflow_estimator.python.estimator.export import export_output as m",
     "m.PredictOutput", export_lib.PredictOutput),
    ("from tensorflow.python.estimator import export as m", "m.ServingInputReceiver",
     export_lib.ServingInputReceiver),
    ("from tensorflow.python.estimator.export import export_output as m", "m.__name__",
     "tensorflow.python.estimator.export.export_output"),
    ("from tensorflow.python.estimator import inputs as m", "m.numpy_input_fn.__name__",
     "numpy_input_fn"),
    ("from tensorflow_estimator.python.estimator.hooks import basic_session_run_hooks as m",
     "m.LoggingTensorHook", tf.compat.v1.train.LoggingTensorHook),
    ("from tensorflow.compat.v1.estimator.experimental import stop_if_no_decrease_hook as m",
     "m.__name__", "stop_if_no_decrease_hook"),
    # tensor2tensor 1.15.7 (`utils/contrib.py` takes its TF1 branch once tensorflow.contrib
    # imports) and mesh_tensorflow 0.1.21 (`transformer/utils.py`).
    ("from tensorflow.contrib import framework as m", "m.sort", tf.sort),
    ("from tensorflow.contrib import framework as m", "m.argsort", tf.argsort),
    ("from tensorflow.contrib import framework as m", "m.load_checkpoint",
     tf.train.load_checkpoint),
    ("from tensorflow.contrib import util as m", "m.constant_value", tf.get_static_value),
    ("from tensorflow.contrib import learn as m", "issubclass(m.RunConfig, RC)", True),
    ("from tensorflow.contrib.tpu.python.tpu import tpu_estimator as m",
     "m.ExportSavedModelApiVersion.V1.value", 1),
    ("from tensorflow.python.tpu import tpu_config as m", "m.TPUConfig", _T.TPUConfig),
    ("from tensorflow.python.tpu import tpu_estimator as m", "m.TPUEstimator", _T.TPUEstimator),
    ("from tensorflow.python.tpu import tpu_estimator as m", "m.ExportSavedModelApiVersion",
     lambda: legacy_imports.ExportSavedModelApiVersion),
    # google-research/bigbird core/utils.py (every bigbird module imports compat.v2).
    ("import tensorflow.compat.v2 as tf\nm = tf.compat.v1.estimator.tpu",
     "m.InputPipelineConfig.SLICED", _T.InputPipelineConfig.SLICED),
    ("import tensorflow.compat.v1 as tf\nm = tf.compat.v1.estimator", "m.tpu.TPUEstimator",
     _T.TPUEstimator),
    ("from tensorflow.compat.v2 import estimator as m", "m.tpu.RunConfig", _T.RunConfig),
]


def _real_package_serves(statement):
    """True when the statement imports a module tensorflow-estimator itself serves (the
    hybrid route: `estimator_map.HYBRID_MODULES`); tests/test_canned_import.py covers it."""
    if not estimator_map.package_installed():
        return False
    words = statement.split()
    if words[0] != "from" or not words[1].startswith(estimator_map.TFE_PRIVATE):
        return False
    relative = f"{words[1]}.{words[3]}"[len(estimator_map.TFE_PRIVATE) + 1:]
    return estimator_map.hybrid_owner(relative) == estimator_map.MODEL


def _check_form(statement, bound, expected, builtins_dict=None):
    if _real_package_serves(statement):
        ns = _exec(statement, builtins_dict)
        assert not isinstance(ns["m"], namespaces.AliasNamespace), statement
        return
    ns = _exec(f"from tpu_estimator_compat import RunConfig as RC\n{statement}\n"
               f"value = {bound}", builtins_dict)
    if getattr(expected, "__name__", None) == "<lambda>":
        expected = expected()  # Looked up now: another test may have installed a mapping.
    assert ns["value"] is expected or ns["value"] == expected, (statement, ns["value"])


@pytest.mark.parametrize("statement,bound,expected", _FORMS, ids=[f[0] for f in _FORMS])
def test_import_form_serves_the_library(statement, bound, expected):
    _check_form(statement, bound, expected)


@pytest.mark.parametrize("statement,bound,expected", _FORMS, ids=[f[0] for f in _FORMS])
def test_import_form_in_tf1_mode(statement, bound, expected):
    tf1_mode.tf1_module()
    _check_form(statement, bound, expected, tf1_mode.tf1_builtins())


def test_modules_are_real_and_shared_between_paths():
    import tensorflow.contrib.tpu  # noqa: F401
    from tensorflow.contrib import tpu as contrib_tpu

    assert sys.modules["tensorflow.contrib.tpu"] is contrib_tpu
    assert sys.modules["tensorflow.contrib"] is namespaces.installed()["contrib"]
    assert tf.compat.v1.contrib.tpu is contrib_tpu
    import tensorflow_estimator

    assert tensorflow_estimator.estimator is tf.compat.v1.estimator


@pytest.mark.parametrize("statement,symbol", [
    ("from tensorflow.contrib.opt import LARSOptimizer", "`tf.contrib.opt.LARSOptimizer`"),
    ("from tensorflow.contrib.cloud import BigtableClient", "`tf.contrib.cloud.BigtableClient`"),
    ("from tensorflow.contrib.tpu.python.tpu.tpu_estimator import NoSuch",
     "`tf.contrib.tpu.python.tpu.tpu_estimator.NoSuch`"),
    ("from tensorflow_estimator.python.estimator import no_such_module",
     "`tensorflow_estimator.python.estimator.no_such_module`"),
    ("from tensorflow.python.estimator.tpu.tpu_estimator import NoSuch",
     "`tensorflow_estimator.python.estimator.tpu.tpu_estimator.NoSuch`"),
    ("import tensorflow.contrib.tpu.python.tpu.tpu_estimator.NoSuch",
     "`tf.contrib.tpu.python.tpu.tpu_estimator.NoSuch`"),
    ("from tensorflow.compat.v1.estimator import NoSuch", "`tf.estimator.NoSuch`"),
    ("from tensorflow.estimator.tpu import TPUDistributionStrategy",
     "`tf.estimator.tpu.TPUDistributionStrategy`"),
    ("from tensorflow_estimator.python.estimator.canned.dnn import NoSuch",
     "`tensorflow_estimator.python.estimator.canned.dnn.NoSuch`"),
])
@pytest.mark.parametrize("mode", ["plain", "tf1"])
def test_missing_name_fails_with_our_error_naming_it(statement, symbol, mode):
    builtins_dict = tf1_mode.tf1_builtins() if mode == "tf1" else None
    with pytest.raises(ImportError) as e:
        _exec(statement, builtins_dict)
    message = str(e.value)
    if _real_package_serves(statement) and "canned.dnn" in statement:
        return  # The package's own module: Python's "cannot import name".
    assert symbol in message and "is not available on TensorFlow 2 through tpu_estimator_compat" \
        in message
    if mode == "plain":  # TF1 mode prefixes its own "cannot import name ... in TF1 mode:".
        assert "cannot import name" not in message


def test_unrunnable_legacy_symbols_fail_when_used():
    from tensorflow.contrib.tpu.python.tpu import async_checkpoint
    from tensorflow.python.estimator.canned import dnn

    class Mine(dnn.DNNClassifier):
        pass

    if estimator_map.package_installed():  # tensorflow-estimator's, on our Estimator.
        assert issubclass(Mine, estimator_lib.Estimator)
    else:
        with pytest.raises(namespaces.LegacySymbolUnavailableError,
                           match=r"`tf\.estimator\.DNNClassifier`"):
            Mine(hidden_units=[2], feature_columns=[])
    # Served since: a CheckpointSaverHook replacing the estimator's saver, as legacy took it.
    assert async_checkpoint.AsyncCheckpointSaverHook is contrib_standins.AsyncCheckpointSaverHook


def test_load_global_step_reads_a_real_checkpoint(tmp_path):
    helper = legacy_imports._load_global_step_from_checkpoint_dir
    assert helper(str(tmp_path)) == 0  # No checkpoint yet: legacy answered 0.
    with tf.Graph().as_default():
        step = tf.compat.v1.train.get_or_create_global_step()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.assign(step, 7))
            tf.compat.v1.train.Saver().save(session, str(tmp_path / "model.ckpt"), global_step=7)
    assert helper(str(tmp_path)) == 7


def test_efficientnet_resume_idiom_reads_the_step_the_estimator_wrote(tmp_path):
    """tensorflow/tpu efficientnet main.py: contrib TPUEstimator, then the private step read."""
    import models  # tests/models.py: tiny r1 model_fns.
    from tensorflow.contrib import tpu as contrib_tpu
    from tensorflow.python.estimator import estimator

    assert estimator._load_global_step_from_checkpoint_dir(str(tmp_path)) == 0
    config = contrib_tpu.RunConfig(model_dir=str(tmp_path),
                                   tpu_config=contrib_tpu.TPUConfig(iterations_per_loop=3))
    est = contrib_tpu.TPUEstimator(model_fn=models.linear_model_fn, config=config,
                                   use_tpu=False, train_batch_size=32)
    est.train(models.digits_input_fn(flat=True), max_steps=6)
    assert estimator._load_global_step_from_checkpoint_dir(str(tmp_path)) == 6


def test_private_library_names_are_their_home_module_s_attributes():
    """`training._TrainingExecutor` is `api/train_and_eval.py`'s `TrainingExecutor`: patching
    it on the legacy path reaches `train_and_evaluate`, as on legacy (one module held both)."""
    from unittest import mock

    from tensorflow_estimator.python.estimator import training

    from tpu_estimator_compat.api import evaluator, train_and_eval

    assert training._TrainingExecutor is train_and_eval.TrainingExecutor
    assert training._ContinuousEvalListener is evaluator.ContinuousEvalListener
    assert training._StopAtSecsHook is train_and_eval.StopAtSecsHook
    estimator = types.SimpleNamespace(config=types.SimpleNamespace(task_type="", task_id=0))
    with mock.patch.object(training, "_TrainingExecutor") as patched:
        assert train_and_eval.TrainingExecutor is patched
        training.train_and_evaluate(estimator, train_and_eval.TrainSpec(lambda: 1),
                                    train_and_eval.EvalSpec(lambda: 1))
        assert patched.return_value.run.called
    assert train_and_eval.TrainingExecutor is training._TrainingExecutor
    assert train_and_eval.TrainingExecutor.__name__ == "TrainingExecutor"


def test_real_modules_served_under_legacy_names_keep_their_kind():
    import tf_slim.nets.inception_v3 as real

    from tensorflow.contrib.slim.python.slim.nets import inception_v3

    assert inception_v3 is real and "__path__" not in real.__dict__


def test_finder_ignores_other_modules():
    finder = legacy_imports.LegacyModuleFinder()
    assert finder.find_spec("json", None) is None
    assert finder.find_spec("tensorflow.python.ops", None) is None
    for look_alike in ("tensorflow.contribution", "tensorflow_estimators", "tensorflow.estimators",
                       "tensorflow.python.estimators", "tensorflow.compat.v1.estimatorx"):
        assert finder.find_spec(look_alike, None) is None, look_alike
    assert sum(isinstance(f, legacy_imports.LegacyModuleFinder) for f in sys.meta_path) == 1


@pytest.mark.slow
def test_tensorflow_hub_imports_with_aliases_in_a_fresh_process():
    code = textwrap.dedent("""
        import tpu_estimator_compat
        tpu_estimator_compat.install_aliases()
        import tensorflow_hub as hub
        from tpu_estimator_compat.api import train_and_eval as training
        assert issubclass(hub.LatestModuleExporter, training.Exporter)
        print("OK", hub.__version__)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=TIMEOUT_S, cwd=REPO,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().startswith("OK")


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """Both launcher runs started together so their TensorFlow start-ups overlap."""
    runs = {}
    for mode in ("on", "off"):
        out = tmp_path_factory.mktemp(f"tf1_{mode}")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO, ASYNC_CHECKPOINT="1")
        with open(out / "stdout", "w") as o, open(out / "stderr", "w") as e:
            process = subprocess.Popen(
                [sys.executable, "-m", "tpu_estimator_compat.run", f"--tf1_mode={mode}",
                 SCRIPT, str(out)], stdout=o, stderr=e, env=env, cwd=str(out))
        runs[mode] = (process, out)
    yield runs
    for process, _ in runs.values():
        if process.poll() is None:
            process.kill()


@pytest.mark.slow
@pytest.mark.slow_cases('on')
@pytest.mark.parametrize("mode", ["on", "off"])
def test_launcher_runs_the_legacy_import_forms(launched, mode):
    process, out = launched[mode]
    returncode = process.wait(timeout=TIMEOUT_S)
    stdout, stderr = (out / "stdout").read_text(), (out / "stderr").read_text()
    assert returncode == 0, stderr[-3000:]
    assert f"TF1 mode: {mode}" in stderr
    lines = stdout.splitlines()
    assert "global step 5" in lines
    assert "same TPUEstimator True" in lines and "same RunConfig True" in lines
    assert "resolver NoTPUClusterResolver" in lines
    assert "layer_norm tf_slim.layers.layers tf_slim.ops.arg_scope" in lines
    assert "hub exporter Exporter" in lines
    assert "async hook class AsyncCheckpointSaverHook" in lines


def test_tf2_private_tpu_modules_that_tensorflow_has_stay_tensorflow_s():
    from tensorflow.python.tpu import tpu_feed  # pylint: disable=import-outside-toplevel

    assert tpu_feed.__file__.endswith("tpu_feed.py")
    with pytest.raises(ImportError):
        _exec("from tensorflow.python.tpu import no_such_module")


def test_tensor2tensor_contrib_idioms_in_a_tpu_estimator_run(tmp_path):
    """tensor2tensor's TF1 branch: a model function decorated with
    `contrib.framework.deprecated`, `sort`/`argsort`/`get_name_scope`/`util.constant_value`
    inside model_fn, hooks through `contrib.learn.monitors.replace_monitors_with_hooks`,
    `export_saved_model_api_version=tpu_estimator.ExportSavedModelApiVersion.V1`."""
    ns = _exec("""
        import numpy as np
        import tensorflow.compat.v1 as tf
        from tensorflow.contrib import framework, learn, util
        from tensorflow.contrib.tpu.python.tpu import tpu_config, tpu_estimator

        @framework.deprecated(None, "Use something else.")
        def body(x):
            return tf.layers.dense(x, 1)

        seen = {}

        def model_fn(features, labels, mode, params):
            with tf.variable_scope("model"):
                seen["scope"] = framework.get_name_scope()
                seen["k"] = util.constant_value(tf.constant(2))
                top = framework.sort(features, axis=1, direction="DESCENDING")[:, :seen["k"]]
                order = framework.argsort(features, axis=1)
                out = body(tf.concat([top, tf.cast(order, tf.float32)], axis=1))
            loss = tf.losses.mean_squared_error(labels, out)
            train_op = tf.train.GradientDescentOptimizer(0.1).minimize(
                loss, global_step=tf.train.get_global_step())
            return tpu_estimator.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

        def input_fn(params):
            x = np.arange(32, dtype=np.float32).reshape(8, 4) / 32
            return tf.data.Dataset.from_tensor_slices((x, x[:, :1])).repeat().batch(
                params["batch_size"], drop_remainder=True)

        def run(model_dir):
            config = tpu_config.RunConfig(
                model_dir=model_dir, tpu_config=tpu_config.TPUConfig(iterations_per_loop=2))
            est = tpu_estimator.TPUEstimator(
                model_fn=model_fn, config=config, use_tpu=False, train_batch_size=4,
                export_saved_model_api_version=tpu_estimator.ExportSavedModelApiVersion.V1)
            hooks = learn.monitors.replace_monitors_with_hooks(
                [tf.train.StopAtStepHook(last_step=4)], est)
            est.train(input_fn, max_steps=4, hooks=hooks)
            return est
    """)
    est = ns["run"](str(tmp_path))
    assert est.get_variable_value("global_step") == 4
    assert ns["seen"]["k"] == 2 and ns["seen"]["scope"].endswith("model")
    with pytest.raises(namespaces.LegacySymbolError, match="tf.contrib.learn.monitors"):
        ns["learn"].monitors.replace_monitors_with_hooks([object()], est)


def test_contrib_tpu_function_gives_model_fn_the_shard_count(tmp_path, strategy):
    """google/compare_gan `arch_ops.standardize_batch`: `from tensorflow.contrib.tpu.python.tpu
    import tpu_function`, then cross-replica batch norm when
    `tpu_function.get_tpu_context().number_of_shards is not None`. TF 1.14+'s contrib module
    re-exported the core one, so with use_tpu=True model_fn reads the replica count there
    (`LegacySymbolError` for `get_tpu_context` before)."""
    ns = _exec("from tensorflow.contrib.tpu.python.tpu import tpu_function")
    tpu_function, seen = ns["tpu_function"], []

    def model_fn(features, labels, mode, params):
        del labels, params
        seen.append(tpu_function.get_tpu_context().number_of_shards)
        w = tf.compat.v1.get_variable("w", initializer=tf.ones([2]))
        loss = tf.reduce_mean(features * w)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        return _T.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    config = _T.RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                          tpu_config=_T.TPUConfig(iterations_per_loop=1))
    est = _T.TPUEstimator(model_fn=model_fn, config=config, use_tpu=True, train_batch_size=8)
    est.train(lambda params: tf.data.Dataset.from_tensors(tf.ones([2])).repeat().batch(
        params["batch_size"], drop_remainder=True), max_steps=1)
    assert set(seen) == {strategy.num_replicas_in_sync}


_LIBRARY_NAMES = [(module, name, where)
                  for module, names in estimator_map.PRIVATE_LIBRARY_NAMES.items()
                  for name, where in names.items()]


@pytest.mark.parametrize("module,name,where", _LIBRARY_NAMES,
                         ids=[f"{m}.{n}" for m, n, _ in _LIBRARY_NAMES])
def test_private_library_names_are_the_library_objects(module, name, where):
    import importlib

    served = importlib.import_module(f"{estimator_map.TFE_PRIVATE}.{module}")
    library, _, attribute = where.partition(":")
    assert getattr(served, name) is getattr(importlib.import_module(library), attribute)


def test_removed_tpu_embedding_module_serves_the_embedding_configs():
    from tensorflow.python.tpu import tpu_embedding  # pylint: disable=g-direct-tensorflow-import

    from tpu_estimator_compat.embedding import config as embedding_config

    assert tpu_embedding.TableConfig is embedding_config.TableConfig
    assert tpu_embedding.FeatureConfig(table_id="t").max_sequence_length == 0
    with pytest.raises(AttributeError, match="MomentumParameters"):
        tpu_embedding.MomentumParameters  # noqa: B018  # Not served: a clear error.


def test_removed_eager_profiler_module_profiles_as_legacy_s(tmp_path):
    """`from tensorflow.python.eager import profiler` (tensorflow/models' official
    `keras_utils.py`, imported by every official r1 test) failed on TF 2.21: TF 2.16 removed
    the module. Served: start/stop return a trace, save writes legacy's files."""
    from tensorflow.python.eager import profiler  # pylint: disable=g-direct-tensorflow-import

    with pytest.raises(profiler.ProfilerNotRunningError, match="No profiler is running"):
        profiler.stop()
    profiler.start()
    with pytest.raises(profiler.ProfilerAlreadyRunningError, match="Another profiler"):
        profiler.start()
    tf.reduce_sum(tf.range(10))
    result = profiler.stop()
    assert isinstance(result, bytes) and result
    profiler.save(str(tmp_path), result)
    (trace,) = glob.glob(str(tmp_path / "plugins" / "profile" / "*" / "local.trace"))
    with open(trace, "rb") as f:
        assert f.read() == result
    (marker,) = glob.glob(str(tmp_path / "*.profile-empty"))
    events = list(tf.compat.v1.train.summary_iterator(marker))
    assert [e.file_version for e in events] == ["brain.Event:2"]
    profiler.save(str(tmp_path), result)  # A second save keeps the one marker file.
    assert len(glob.glob(str(tmp_path / "*.profile-empty"))) == 1
    with pytest.raises(AttributeError, match="tf.profiler.experimental"):
        profiler.Profiler  # noqa: B018  # Not served: a clear error.
