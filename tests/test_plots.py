import matplotlib

matplotlib.use("Agg")  # tests only: no display here; notebooks keep the inline backend
import matplotlib.pyplot as plt
import numpy as np

from fltutor import partition, plots


def test_partition_heatmap_shows_the_class_counts(labels):
    parts = partition.shards(labels, 12, 2, seed=0)
    ax = plots.plot_partition(labels, parts)
    shown = ax.get_images()[0].get_array()
    np.testing.assert_array_equal(shown, partition.class_counts(labels, parts))
    assert ax.get_images()[0].get_clim()[0] == 0  # colour scale anchored at "no data"
    plt.close("all")


def test_client_accuracy_histograms_split_by_group():
    acc = np.array([90.0, 95.0, 92.0, 20.0])
    axes = plots.plot_client_accuracy({"fedavg": acc}, [0, 0, 0, 1])
    heights = [sum(p.get_height() for p in c) for c in axes[0].containers]
    assert heights == [3, 1]  # three majority clients, one minority client
    plt.close("all")


def test_interact_headless_calls_once(monkeypatch):
    calls = []
    monkeypatch.setenv("FLTUTOR_HEADLESS", "1")
    assert plots.interact(lambda a=2: calls.append(a) or a * 10, a=(1, 5)) == 20
    assert calls == [2]
