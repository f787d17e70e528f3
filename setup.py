"""Packaging for tpu_estimator_compat.

Depends on the full `tensorflow` wheel, not `tensorflow-cpu`: `tf-keras` requires the
`tensorflow` distribution, and installing it next to `tensorflow-cpu` puts two wheels into
one `tensorflow/` folder.
"""
import setuptools

setuptools.setup(
    name="tpu_estimator_compat",
    version="0.1.0",
    description="Run TF1 TPUEstimator model_fns unchanged on TF2 tf.distribute strategies.",
    packages=setuptools.find_packages(include=["tpu_estimator_compat", "tpu_estimator_compat.*"]),
    # TensorFlow's public names, read by the scan without importing TensorFlow.
    package_data={"tpu_estimator_compat.scan": ["tf_api_names.txt"]},
    python_requires=">=3.11",
    install_requires=[
        "tensorflow>=2.16,<2.22",
        "tf-keras>=2.16,<2.22",
        "absl-py",
        # The canned estimators and heads (model code only; the engine is this library's).
        # Its wheel declares no requirements, so no TensorFlow pin comes with it.
        "tensorflow-estimator==2.15.0",
        # Serves tf.contrib.layers/framework/metrics/slim under their legacy variable names.
        "tf-slim>=1.1",
        # host_call's tf.summary.scalar needs it; TF 2.21 does not install it.
        "tensorboard>=2.16,<2.22",
    ],
    extras_require={
        "test": ["pytest", "hypothesis", "scikit-learn"],
        "data": ["scikit-learn"],
    },
    entry_points={
        "console_scripts": [
            "tpu-estimator-compat-run=tpu_estimator_compat.run:main",
            "tpu-estimator-compat-scan=tpu_estimator_compat.scan.cli:main",
        ],
    },
)
