"""Training a round's rows in chunks (``row_chunk``) gives the numbers of one block, for every method.

On a CPU the default chunk is small (about 20 float64 MLP rows; 2 for ResNet-18 or DLA), so real runs
train in chunks, while the per-method references train one block. Each method's own reference test
therefore says nothing about the chunked path: here every registered method trains the same sweep
(two runs, so run boundaries fall inside chunks) with chunks of 1 and 3 rows and in one block, in
float64, and the global models, the clients' private state, the server state and the logs must agree
exactly (a chunk holds whole rows, so nothing is summed in another order).
"""
import pytest
import torch

from fltutor import methods
from fltutor.federation import Federation

from tiny import METHOD_SETTINGS, tiny_fed

BASE = dict(rounds=2, client_fraction=0.5, local_epochs=1, batch_size=8, lr=0.05)
RUNS = [{"seed": 0}, {"seed": 1}]


def _run(name, row_chunk):
    fed = Federation("mlp", tiny_fed(), name, runs=RUNS, device="cpu", dtype=torch.float64, progress=False,
                     row_chunk=row_chunk, **{**BASE, **METHOD_SETTINGS.get(name, {})})
    fed.run()
    return fed


@pytest.mark.parametrize("name", methods.names())
def test_chunked_rows_train_as_one_block(name):
    block = _run(name, 10_000)
    assert block.row_chunk >= 2 * 8, "the reference must train every row of a round as one block"
    for chunk in (1, 3):
        part = _run(name, chunk)
        for k, v in block.global_params.items():
            torch.testing.assert_close(part.global_params[k], v, rtol=0, atol=1e-12, msg=f"{name} chunk {chunk}: {k}")
        for k, v in block.private.items():
            torch.testing.assert_close(part.private[k], v, rtol=0, atol=1e-12, msg=f"{name} chunk {chunk}: private {k}")
        for i, (a, b) in enumerate(zip(part.server, block.server)):
            assert a.keys() == b.keys()
            for k in b:
                if isinstance(b[k], torch.Tensor):
                    torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-12, msg=f"{name} chunk {chunk}: run {i} {k}")
        assert [h["clients"] for h in part.history] == [h["clients"] for h in block.history]
        assert [h["local_acc"] for h in part.history] == pytest.approx([h["local_acc"] for h in block.history],
                                                                       abs=1e-9)
