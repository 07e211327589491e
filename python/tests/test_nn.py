"""gemmkit.nn modules and gemmkit.patch."""

import copy

import pytest
import torch

import gemmkit
from conftest import assert_close_to


class SmallModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1),
            torch.nn.SiLU(),
            torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=4, bias=False),
            torch.nn.ConvTranspose2d(8, 6, 4, stride=2, padding=1),
            torch.nn.Conv2d(6, 6, 3, padding=1, padding_mode="reflect"),
        )
        self.seq = torch.nn.Conv1d(6, 4, 5, padding=2, dilation=1)
        self.vol = torch.nn.Conv3d(4, 4, (1, 3, 3), padding=(0, 1, 1))
        self.vol_up = torch.nn.ConvTranspose3d(4, 2, 2, stride=2)
        self.seq_up = torch.nn.ConvTranspose1d(6, 4, 3, stride=2, output_padding=1)
        self.head = torch.nn.Linear(4, 5)

    def forward(self, x):
        h = self.features(x)
        n, c, hh, ww = h.shape
        s = self.seq(h.reshape(n, c, hh * ww))
        v = self.vol_up(self.vol(s.reshape(n, 4, 1, hh, ww)))
        u = self.seq_up(h.reshape(n, c, hh * ww))
        return self.head(s.transpose(1, 2)), v, u


def test_patch_keeps_outputs_state_dict_and_parameters():
    torch.manual_seed(0)
    model = SmallModel().eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        expected = model(x)
    state = copy.deepcopy(model.state_dict())
    parameters = list(model.parameters())
    gemmkit.patch(model)
    assert type(model.features[0]) is gemmkit.nn.Conv2d
    assert type(model.features[3]) is gemmkit.nn.ConvTranspose2d
    assert type(model.seq) is gemmkit.nn.Conv1d
    assert type(model.vol) is gemmkit.nn.Conv3d
    assert type(model.head) is gemmkit.nn.Linear
    assert isinstance(model.head, torch.nn.Linear)
    assert [p is q for p, q in zip(model.parameters(), parameters)] == [True] * len(parameters)
    patched_state = model.state_dict()
    assert list(patched_state) == list(state)
    for key in state:
        assert torch.equal(patched_state[key], state[key]), key
    with torch.no_grad():
        got = model(x)
    for g, e in zip(got, expected):
        assert_close_to(g, e, torch.float32)


def test_state_dict_round_trip_between_torch_and_gemmkit_modules():
    torch.manual_seed(1)
    reference = torch.nn.Conv2d(4, 6, 3, padding=1)
    ours = gemmkit.nn.Conv2d(4, 6, 3, padding=1)
    ours.load_state_dict(reference.state_dict())
    assert ours.weight.permute(0, 2, 3, 1).is_contiguous()  # channels-last kept
    back = torch.nn.Conv2d(4, 6, 3, padding=1)
    back.load_state_dict(ours.state_dict())
    assert torch.equal(back.weight, reference.weight)
    x = torch.randn(1, 4, 7, 7)
    with torch.no_grad():
        assert_close_to(ours(x), reference(x), torch.float32)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_modules_in_16_bit(dtype):
    torch.manual_seed(2)
    lin = torch.nn.Linear(32, 16).to(dtype)
    conv = torch.nn.Conv2d(8, 8, 3, padding=1).to(dtype)
    x = torch.randn(3, 32).to(dtype)
    y = torch.randn(1, 8, 6, 6).to(dtype)
    with torch.no_grad():
        expected = (torch.nn.functional.linear(x.double(), lin.weight.double(),
                                               lin.bias.double()),
                    torch.nn.functional.conv2d(y.double(), conv.weight.double(),
                                               conv.bias.double(), padding=1))
        gemmkit.patch(lin)
        gemmkit.patch(conv)
        assert_close_to(lin(x), expected[0], dtype)
        assert_close_to(conv(y), expected[1], dtype)


def test_patch_options_and_subclasses_left_alone():
    class MyLinear(torch.nn.Linear):
        pass

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), MyLinear(4, 4), torch.nn.Conv1d(4, 4, 1))
    gemmkit.patch(model, conv=False)
    assert type(model[0]) is gemmkit.nn.Linear
    assert type(model[1]) is MyLinear
    assert type(model[2]) is torch.nn.Conv1d
    gemmkit.patch(model, linear=False)
    assert type(model[2]) is gemmkit.nn.Conv1d


def test_conv_transpose_output_size_argument():
    torch.manual_seed(3)
    reference = torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1)
    ours = copy.deepcopy(reference)
    gemmkit.patch(ours)
    x = torch.randn(1, 4, 5, 5)
    with torch.no_grad():
        assert_close_to(ours(x, output_size=[10, 10]), reference(x, output_size=[10, 10]),
                        torch.float32)


def test_forward_with_trainable_parameters_and_backward_refused():
    import warnings
    lin = gemmkit.nn.Linear(8, 4)
    conv = gemmkit.nn.Conv2d(2, 2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no autograd-fallback warning on the forward
        y = lin(torch.randn(3, 8))
        z = conv(torch.randn(1, 2, 5, 5))
    assert y.shape == (3, 4) and z.shape == (1, 2, 3, 3)
    for out in (y, z):
        with pytest.raises(RuntimeError, match="no backward"):
            out.sum().backward()
