import matplotlib

matplotlib.use("Agg")  # tests only: no display here; notebooks keep the inline backend
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from fltutor import methods, partition, plots


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


# ---- privacy audit (notebook 05) ----------------------------------------------------------------

def _flat(s):
    return " ".join(s.split())


def test_threat_rows_cover_every_registered_method():
    rows = plots.threat_rows()
    assert [r["method"] for r in rows] == methods.names()
    for r in rows:
        cls, _ = methods.get(r["method"])
        assert (r["message"], r["client"], r["server"]) == (cls.message_holds, cls.client_keeps, cls.server_holds)
        assert all(r[k].strip() for k in ("message", "client", "server")), r["method"]
        assert r["exposure"] in plots.EXPOSURE_COLORS
    by_name = {r["method"]: r["exposure"] for r in rows}
    assert by_name["local"] == "nothing" and by_name["fedper"] == "partial" and by_name["fedavg"] == "whole model"
    # DP-FedAvg's noise is added on the server: the message is exposed whole, the released model noised
    assert by_name["dp_fedavg"] == "whole model"
    assert {r["method"]: r["server_exposure"] for r in rows}["dp_fedavg"] == "noised"
    with pytest.raises(ValueError, match="unknown"):
        plots.threat_rows(["no_such_method"])


def test_threat_model_draws_one_row_of_boxes_per_method_with_every_text():
    rows = plots.threat_rows(["fedavg", "local", "fedper"])
    ax = plots.plot_threat_model(rows)
    assert len(ax.patches) == 3 * len(rows)
    shown = [_flat(t.get_text()) for t in ax.texts]
    for r in rows:
        for k in ("method", "message", "client", "server"):
            assert _flat(r[k]) in shown, (r["method"], k)
    # boxes of one method share a row; the message box takes the exposure's colour
    ys = [p.get_y() for p in ax.patches]
    assert len(set(ys)) == len(rows) and all(ys[3 * i] == ys[3 * i + 2] for i in range(len(rows)))
    colors = [p.get_facecolor()[:3] for p in ax.patches[::3]]
    expected = [plots.EXPOSURE_COLORS[r["exposure"]] for r in rows]
    np.testing.assert_allclose(colors, [matplotlib.colors.to_rgb(c) for c in expected])
    assert "whole model" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close("all")


def test_threat_model_rejects_an_unknown_exposure():
    row = {"method": "x", "message": "m", "client": "c", "server": "s", "exposure": "most of it"}
    with pytest.raises(ValueError, match=r"rows\[0\]\['exposure'\]"):
        plots.plot_threat_model([row])
    with pytest.raises(ValueError, match=r"rows\[0\].*server"):
        plots.plot_threat_model([{k: v for k, v in row.items() if k != "server"}])
    plt.close("all")


def test_roc_log_axes_clip_zeros_to_the_floor():
    fpr, tpr = torch.tensor([0.0, 0.0, 0.01, 0.5, 1.0]), torch.tensor([0.0, 0.2, 0.4, 0.9, 1.0])  # tensors accepted
    ax = plots.plot_roc({"fedavg": (fpr, tpr, 0.81), "local": (np.array([0.0, 1e-4, 1.0]), np.array([0.0, 0.3, 1.0]))})
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_xlim() == pytest.approx((1e-4, 1))  # the smallest positive FPR is below 1e-3
    curves = ax.get_lines()[:2]
    assert [len(line.get_xdata()) for line in curves] == [5, 3]
    for line in curves:
        assert np.min(line.get_xdata()) == pytest.approx(1e-4) and np.min(line.get_ydata()) == pytest.approx(1e-4)
    guides = sorted(line.get_xdata()[0] for line in ax.get_lines()[3:])
    assert guides == pytest.approx([1e-3, 1e-2])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["fedavg (AUC 0.810)", "local", "chance"]
    plt.close("all")


def test_roc_default_floor_and_linear_axes():
    curve = (np.array([0.0, 0.25, 1.0]), np.array([0.0, 0.5, 1.0]))
    ax = plots.plot_roc({"a": curve})
    assert ax.get_xlim() == pytest.approx((1e-3, 1)) and ax.get_ylim() == pytest.approx((1e-3, 1))
    ax = plots.plot_roc({"a": curve}, log=False)
    assert ax.get_xscale() == "linear"
    np.testing.assert_array_equal(ax.get_lines()[0].get_xdata(), curve[0])  # nothing clipped
    with pytest.raises(ValueError, match=r"curves\['a'\]"):
        plots.plot_roc({"a": (np.zeros(3), np.zeros(2))})
    plt.close("all")


def test_privacy_utility_points_labels_and_group_line():
    rows = [{"method": "fedavg", "local_acc": 80.0, "auc": 0.62, "local_acc_sd": 1.5, "auc_sd": 0.02},
            {"method": "local", "local_acc": 90.0, "auc": 0.75},
            {"method": "dp_fedavg", "group": "dp_fedavg", "label": "eps=8", "local_acc": 75.0, "auc": 0.55},
            {"method": "dp_fedavg", "group": "dp_fedavg", "label": "eps=1", "local_acc": 60.0, "auc": 0.51},
            {"method": "dp_fedavg", "group": "dp_fedavg", "label": "eps=4", "local_acc": 70.0, "auc": 0.53}]
    ax = plots.plot_privacy_utility(rows)
    assert len(ax.containers) == len(rows)  # one error-bar point per row
    xy = [tuple(c.lines[0].get_xydata()[0]) for c in ax.containers]
    assert xy == [(r["local_acc"], r["auc"]) for r in rows]
    assert ax.containers[0].has_xerr and ax.containers[0].has_yerr and not ax.containers[1].has_yerr
    assert [t.get_text() for t in ax.texts] == ["fedavg", "local", "eps=8", "eps=1", "eps=4"]
    group = [line for line in ax.get_lines() if line.get_label() == "dp_fedavg"]
    assert len(group) == 1
    np.testing.assert_array_equal(group[0].get_xdata(), [60.0, 70.0, 75.0])  # joined in order of x
    np.testing.assert_array_equal(group[0].get_ydata(), [0.51, 0.53, 0.55])
    chance = [line for line in ax.get_lines() if line.get_label() == "chance"]
    assert list(chance[0].get_ydata()) == [0.5, 0.5]
    with pytest.raises(ValueError, match=r"rows\[1\].*auc"):
        plots.plot_privacy_utility([rows[0], {"method": "x", "local_acc": 1.0}])
    plt.close("all")


@pytest.mark.parametrize("channels", [None, 1, 3])
def test_image_grid_draws_every_cell_clipped(channels):
    R, C, H, W = 2, 3, 4, 5
    shape = (R, C, H, W) if channels is None else (R, C, channels, H, W)
    images = torch.linspace(-0.5, 1.5, int(np.prod(shape))).reshape(shape)
    images[1, 2] = float("nan")  # a missing cell
    axes = plots.plot_image_grid(images, row_labels=["fedavg", "waffle_ibp"], col_labels=["0", "1", "2"])
    assert axes.shape == (R, C)
    assert sum(len(a.get_images()) for a in axes.ravel()) == R * C
    shown = np.asarray(axes[0, 1].get_images()[0].get_array())
    expected = np.clip(images[0, 1].numpy(), 0, 1)
    if channels == 3:
        np.testing.assert_allclose(shown[..., :3], np.moveaxis(expected, 0, -1))
        assert (shown[..., 3] == 1).all()
        assert (axes[1, 2].get_images()[0].get_array()[..., 3] == 0).all()  # NaN cell transparent
    else:
        np.testing.assert_allclose(shown, expected.reshape(H, W))
        assert axes[1, 2].get_images()[0].get_array().mask.all()  # NaN cell blank
    assert shown.min() >= 0 and shown.max() <= 1
    assert [a.get_title() for a in axes[0]] == ["0", "1", "2"]
    assert axes[1, 0].get_ylabel() == "waffle_ibp"
    assert not axes[0, 0].get_xticks().size and not axes[0, 0].get_yticks().size
    plt.close("all")


def test_image_grid_rejects_bad_shapes():
    with pytest.raises(ValueError, match="images"):
        plots.plot_image_grid(np.zeros((3, 4, 4)))
    with pytest.raises(ValueError, match="images"):
        plots.plot_image_grid(np.zeros((1, 2, 2, 4, 4)))  # two channels
    with pytest.raises(ValueError, match="row_labels"):
        plots.plot_image_grid(np.zeros((2, 2, 4, 4)), row_labels=["a"])
    plt.close("all")


def test_plot_lr_grid_marks_missing_cells_and_checks_shapes():
    import matplotlib.pyplot as plt
    from fltutor.plots import plot_lr_grid
    a = np.array([[50.0, np.nan], [80.0, 90.0]])                       # (2 server rates, 2 client rates)
    axes = plot_lr_grid({"AVG": a, "GMA − AVG": a - 60}, [0.01, 0.1], [1.0, 2.0], diff_keys=["GMA − AVG"])
    texts = [t.get_text() for t in axes[0].texts]
    assert texts == ["50.0", "—", "80.0", "90.0"]                      # row-major: server rate, then client rate
    assert [t.get_text() for t in axes[1].texts][0] == "-10.0"
    assert axes[0].get_ylabel().startswith("server rate")
    with pytest.raises(ValueError, match="expected \\(2 server rates, 3 client rates\\)"):
        plot_lr_grid({"AVG": a}, [0.01, 0.05, 0.1], [1.0, 2.0])
    plt.close("all")


def test_plot_lr_grid_notes_replace_a_cells_text_and_leave_the_others():
    import matplotlib.pyplot as plt
    from fltutor.plots import plot_lr_grid
    a = np.array([[50.0, np.nan], [np.nan, 90.0]])
    notes = np.array([["", "diverged"], [None, "4 seeds"]], dtype=object)
    ax = plot_lr_grid({"AVG": a}, [0.01, 0.1], [1.0, 2.0], notes={"AVG": notes})[0]
    assert [t.get_text() for t in ax.texts] == ["50.0", "diverged", "—", "4 seeds"]
    other = plot_lr_grid({"GMA": a}, [0.01, 0.1], [1.0, 2.0], notes={"AVG": notes})[0]   # notes of another panel
    assert [t.get_text() for t in other.texts] == ["50.0", "—", "—", "90.0"]
    plt.close("all")


def test_plot_lr_grid_diff_limit_fixes_the_difference_scale():
    import matplotlib.pyplot as plt
    from fltutor.plots import plot_lr_grid
    d = np.array([[5.0, -2.0], [1.0, np.nan]])
    own = plot_lr_grid({"lead": d}, [0.01, 0.1], [1.0, 2.0], diff_keys=["lead"])[0]
    fixed = plot_lr_grid({"lead": d}, [0.01, 0.1], [1.0, 2.0], diff_keys=["lead"], diff_limit=40.0)[0]
    assert own.images[0].get_clim() == (-5.0, 5.0)                    # the panel's own largest |value|
    assert fixed.images[0].get_clim() == (-40.0, 40.0)
    assert fixed.texts[0].get_color() == "k"                          # +5 is pale on a ±40 scale: dark text
    acc = plot_lr_grid({"acc": d + 50}, [0.01, 0.1], [1.0, 2.0], diff_limit=40.0)[0]
    assert acc.images[0].get_clim() == (0.0, 100.0)                   # accuracy panels keep 0-100
    plt.close("all")


def test_plot_lr_grid_value_limits_spread_cells_that_sit_near_the_top():
    import matplotlib.pyplot as plt
    from fltutor.plots import plot_lr_grid
    a = np.array([[91.0, 96.0], [99.0, np.nan]])
    ax = plot_lr_grid({"acc": a}, [80, 150], [0.4, 1.0], value_limits=(90, 100))[0]
    assert ax.images[0].get_clim() == (90.0, 100.0)
    colours = [t.get_color() for t in ax.texts]
    assert colours[:3] == ["w", "k", "k"]          # light text only on the dark low end (below 95.5 here)
    plt.close("all")
