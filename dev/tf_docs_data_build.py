"""Writes legacy_models/tf_docs/data/: local files of the schema of the data TF's docs download.

    python dev/tf_docs_data_build.py --out legacy_models/tf_docs/data

Deterministic (seed 0); nothing is downloaded:
- titanic_{train,eval}.csv: the columns, value sets and row counts (627, 264) of
  storage.googleapis.com/tf-datasets/titanic/{train,eval}.csv; rows synthesized from a seed, with
  survival depending on sex, class and age so that a model has something to learn.
- iris_{training,test}.csv: scikit-learn's 150 real iris flowers, shuffled, split 120/30, in the
  download.tensorflow.org files' layout (a header row "120,4,setosa,versicolor,virginica").
MNIST, TFDS's mnist, iris and cats_vs_dogs are made at load time (legacy_models/tf_docs/tf_docs_data.py).
"""

import argparse
import os

import numpy as np

TITANIC_COLUMNS = ["survived", "sex", "age", "n_siblings_spouses", "parch", "fare", "class",
                   "deck", "embark_town", "alone"]


def titanic(rng, rows):
    sex = rng.choice(["male", "female"], rows, p=[0.65, 0.35])
    klass = rng.choice(["First", "Second", "Third"], rows, p=[0.24, 0.21, 0.55])
    age = np.round(np.clip(rng.normal(29.0, 13.0, rows), 0.75, 80.0), 0)
    sibsp = rng.choice([0, 1, 2, 3, 4, 5, 8], rows, p=[0.68, 0.23, 0.03, 0.02, 0.02, 0.01, 0.01])
    parch = rng.choice([0, 1, 2, 3, 4, 5], rows, p=[0.76, 0.13, 0.08, 0.01, 0.01, 0.01])
    base_fare = {"First": 84.0, "Second": 21.0, "Third": 13.0}
    fare = np.round([rng.gamma(2.0, base_fare[k] / 2.0) for k in klass], 4)
    deck = [rng.choice(["A", "B", "C", "D", "E"]) if k == "First" and rng.random() < 0.8
            else (rng.choice(["D", "E", "F"]) if k == "Second" and rng.random() < 0.15
                  else "unknown") for k in klass]
    embark = rng.choice(["Southampton", "Cherbourg", "Queenstown", "unknown"], rows,
                        p=[0.72, 0.19, 0.088, 0.002])
    alone = np.where(sibsp + parch == 0, "y", "n")
    logit = (-1.2 + 2.4 * (sex == "female") + 1.0 * (klass == "First") - 0.9 * (klass == "Third")
             - 0.02 * (age - 29.0))
    survived = (rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))).astype(int)
    lines = [",".join(TITANIC_COLUMNS)]
    for row in zip(survived, sex, age, sibsp, parch, fare, klass, deck, embark, alone):
        lines.append("%d,%s,%.1f,%d,%d,%.4f,%s,%s,%s,%s" % row)
    return "\n".join(lines) + "\n"


def iris_files(rng):
    from sklearn.datasets import load_iris
    iris = load_iris()
    order = rng.permutation(len(iris.target))
    out = {}
    for name, part in (("iris_training.csv", order[:120]), ("iris_test.csv", order[120:])):
        lines = ["%d,4,setosa,versicolor,virginica" % len(part)]
        lines += ["%.1f,%.1f,%.1f,%.1f,%d" % (tuple(iris.data[i]) + (iris.target[i],))
                  for i in part]
        out[name] = "\n".join(lines) + "\n"
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(0)
    files = {"titanic_train.csv": titanic(rng, 627), "titanic_eval.csv": titanic(rng, 264)}
    files.update(iris_files(rng))
    for name, text in files.items():
        with open(os.path.join(args.out, name), "w") as f:
            f.write(text)
    for name in sorted(os.listdir(args.out)):
        print(name, os.path.getsize(os.path.join(args.out, name)))


if __name__ == "__main__":
    main()
