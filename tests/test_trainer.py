import pytest
import torch

from narbench.train.trainer import resolve_device, seed_everything


def test_auto_device_is_cpu_without_cuda():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device("cpu").type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_forcing_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        resolve_device("cuda")


def test_seeding_is_reproducible():
    seed_everything(5)
    a = torch.randn(3)
    seed_everything(5)
    assert torch.equal(a, torch.randn(3))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gcn_trains_on_gpu(toy_dataset, tmp_path):
    from narbench.harness.runner import RunConfig, run

    ev = run(RunConfig(encoder="gcn", profile="smoke", device="cuda", out=str(tmp_path), progress=False),
             dataset=toy_dataset)
    assert ev.result.device.startswith("cuda")
    assert ev.result.metrics["mrr@20"] > 0.5


def test_jobs_default_to_the_available_cores_and_reach_the_trainer_from_the_cli(monkeypatch):
    import os

    from narbench import cli
    from narbench.train.trainer import Trainer

    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert Trainer("cpu", progress=False).jobs == expected
    assert Trainer("cpu", progress=False, jobs=3).jobs == 3
    seen = {}

    def fake_run(cfg, console=None):
        seen["jobs"] = cfg.jobs
        raise SystemExit(0)

    monkeypatch.setattr("narbench.harness.runner.run", fake_run)
    with pytest.raises(SystemExit):
        cli.main(["run", "--encoder", "gcn", "--jobs", "3", "--no-progress"])
    assert seen["jobs"] == 3


def _small_encoder(encoder: str):
    """Toy graphs, an untrained `encoder` of width 32 (quick profile otherwise) and a CPU trainer."""
    from dataclasses import replace

    from narbench.core import registry
    from narbench.train.profiles import get_profile
    from narbench.train.trainer import Trainer

    from .conftest import toy_graphs

    seed_everything(0)
    profile = replace(get_profile("quick"), model=replace(get_profile("quick").model, hidden=32))
    enc = registry.load("encoder", encoder)(8, 4, profile)
    return toy_graphs(per_family=6), enc, Trainer("cpu", progress=False, jobs=1)


def _assert_same_rows(emb: torch.Tensor, ref: torch.Tensor, what) -> None:
    """`emb` is `ref` row for row up to float rounding, and each row is nearest its own counterpart.

    Batched differently, the same graphs get the same values but for rounding (a GEMM's blocking
    follows the batch's shape, and differs between CPU kernel sets); a graph embedded in another's
    place, with another's nodes or without some of its own is off by far more than the tolerance."""
    assert emb.shape == ref.shape, what
    torch.testing.assert_close(emb, ref, rtol=1e-5, atol=1e-5, msg=lambda m: f"{what}: {m}")
    dist = torch.cdist(emb.double(), ref.double())
    assert torch.equal(dist.argmin(dim=1), torch.arange(len(ref))), what
    apart = torch.cdist(ref.double(), ref.double()) + torch.eye(len(ref), dtype=torch.float64).mul(1e9)
    assert apart.min() > 1e-3, "two graphs embed alike: the order check would not see them swapped"


@pytest.mark.isa
@pytest.mark.parametrize("encoder", ["gcn", "gat"])
def test_evaluation_batch_size_does_not_change_embeddings(encoder):
    from dataclasses import replace

    graphs, enc, trainer = _small_encoder(encoder)
    profile = enc.profile
    embs = []
    for batch_size in (1, 5, 128, 1024):
        enc.profile = replace(profile, eval_batch_size=batch_size)
        embs.append(enc.embed(trainer, graphs))
    assert embs[0].shape == (len(graphs), 32)
    for batch_size, emb in zip((5, 128, 1024), embs[1:]):
        _assert_same_rows(emb, embs[0], f"eval_batch_size {batch_size}")


@pytest.mark.isa
@pytest.mark.parametrize("encoder", ["gcn", "gat", "gps"])
def test_embedding_the_same_batches_twice_is_exact(encoder):
    """The same graphs in the same batches give bit-identical embeddings (no state, no randomness at eval)."""
    graphs, enc, trainer = _small_encoder(encoder)
    datas = [enc.to_data(g) for g in graphs]
    for kw in ({}, {"max_nodes": max(d.num_nodes for d in datas)}):
        first = trainer.embed(enc, datas, 5, **kw)
        assert torch.equal(trainer.embed(enc, datas, 5, **kw), first), kw


def test_on_epoch_sees_each_epoch_mean_loss_and_training_resumes_in_train_mode():
    from narbench.train.profiles import TrainConfig
    from narbench.train.trainer import Trainer

    model = torch.nn.Linear(2, 1)
    items = [torch.tensor([float(i), 1.0]) for i in range(8)]
    seen = []

    def on_epoch(epoch, loss):
        seen.append((epoch, loss))
        model.eval()  # a probe may switch modes; the loop must switch back

    def step(m, batch):
        assert m.training
        return m(batch).pow(2).mean()

    hist = Trainer("cpu", 0, progress=False).fit(model, items, TrainConfig(epochs=3, batch_size=4, lr=1e-2), step,
                                                  on_epoch=on_epoch)
    assert [e for e, _ in seen] == [0, 1, 2] and [loss for _, loss in seen] == hist.losses


def test_node_budget_batches_keep_order_and_both_limits():
    from narbench.train.trainer import node_budget_batches

    sizes = [5, 5, 5, 20, 1, 1, 1, 1, 9]
    batches = node_budget_batches(sizes, 3, 10)
    assert batches == [[0, 1], [2], [3], [4, 5, 6], [7, 8]]
    assert [i for b in batches for i in b] == list(range(len(sizes)))
    assert node_budget_batches(sizes, 100, 1000) == [list(range(len(sizes)))]
    assert node_budget_batches([], 3, 10) == []


@pytest.mark.isa
@pytest.mark.parametrize("encoder", ["gcn", "gps"])
def test_a_node_budget_does_not_change_embeddings(encoder):
    graphs, enc, trainer = _small_encoder(encoder)
    datas = [enc.to_data(g) for g in graphs]
    whole = trainer.embed(enc, datas, 128)
    most = max(d.num_nodes for d in datas)
    for budget in (1, most, 3 * most):
        _assert_same_rows(trainer.embed(enc, datas, 128, max_nodes=budget), whole, f"max_nodes {budget}")


def test_gps_embeds_in_batches_within_its_attention_bound(monkeypatch):
    from narbench.baselines.gnn import GPSStack
    from narbench.core import registry
    from narbench.train.profiles import get_profile
    from narbench.train.trainer import Trainer

    from .conftest import toy_graphs

    enc = registry.load("encoder", "gps")(8, 4, get_profile("smoke"))
    assert enc.eval_nodes() * enc.window * enc.heads == GPSStack.CHECKPOINT_ELEMENTS
    seen = []
    embed = Trainer.embed

    def spy(self, model, datas, batch_size, **kw):
        seen.append(kw.get("max_nodes"))
        return embed(self, model, datas, batch_size, **kw)

    monkeypatch.setattr(Trainer, "embed", spy)
    enc.embed(Trainer("cpu", progress=False, jobs=1), toy_graphs(per_family=2))
    assert seen == [enc.eval_nodes()]
