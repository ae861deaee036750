import numpy as np
import pytest

from narbench.data.graph import ArchGraph, GraphError


def g(ops, edges, name="g"):
    return ArchGraph(ops=np.array(ops), edges=np.array(edges, dtype=np.int64).reshape(-1, 2).T, name=name,
                     family="f", coarse="c")


def test_valid_graph_passes_and_orders_topologically():
    graph = g([0, 1, 2, 1], [(0, 2), (2, 1), (1, 3), (0, 3)])
    assert graph.validate(num_ops=3) is graph
    order = graph.topological_order().tolist()
    assert order == [0, 2, 1, 3]
    for u, v in graph.edges.T:
        assert order.index(u) < order.index(v)


@pytest.mark.parametrize(
    "ops, edges, num_ops, message",
    [
        ([], [], 3, "empty graph"),
        ([0, 1], [(0, 2)], 3, "edge endpoint 2 out of range"),
        ([0, 1], [(-1, 1)], 3, "edge endpoint -1 out of range"),
        ([0, 5], [(0, 1)], 3, "op id 5 outside the vocabulary"),
        ([0, -1], [(0, 1)], 3, "op id -1 outside the vocabulary"),
        ([0, 1, 2], [(0, 1), (1, 2), (2, 1)], 3, "contains a cycle"),
    ],
)
def test_validation_names_record_and_problem(ops, edges, num_ops, message):
    with pytest.raises(GraphError) as err:
        g(ops, edges, name="bad-model").validate(num_ops=num_ops)
    assert "bad-model" in str(err.value) and message in str(err.value)


def test_cycle_allowed_when_dag_not_required():
    g([0, 1], [(0, 1), (1, 0)]).validate(num_ops=2, dag=False)


def test_bad_edge_shape():
    graph = ArchGraph(ops=np.array([0, 1]), edges=np.array([[0, 1, 1]]), name="x", family="f", coarse="c")
    with pytest.raises(GraphError, match="shape"):
        graph.validate()


def test_content_hash_identifies_graphs():
    a = g([0, 1, 2], [(0, 1), (1, 2)])
    assert a.content_hash() == g([0, 1, 2], [(0, 1), (1, 2)], name="other").content_hash()
    assert a.content_hash() != g([0, 2, 1], [(0, 1), (1, 2)]).content_hash()
    assert a.content_hash() != g([0, 1, 2], [(0, 1), (0, 2)]).content_hash()


def test_to_pyg_one_hot_and_index_features():
    graph = g([0, 2, 1], [(0, 1), (1, 2)])
    one_hot = graph.to_pyg(num_ops=4)
    assert one_hot.x.shape == (3, 4) and one_hot.x.argmax(1).tolist() == [0, 2, 1]
    assert one_hot.edge_index.tolist() == [[0, 1], [1, 2]]
    index = graph.to_pyg(num_ops=4, one_hot=False)
    assert index.x.tolist() == [0, 2, 1] and index.num_nodes == 3
