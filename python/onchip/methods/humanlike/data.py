"""The two packaged human data sets, as scenarios (what a person faced) and behaviour (what they did).

* mobility: Greene's travel-mode choice data (``statsmodels.datasets.modechoice``; Hensher and
  Greene, Sydney-Melbourne trips): 210 travellers, four modes (air, train, bus, car) with in-vehicle
  cost (AUD), in-vehicle time and terminal waiting time (minutes), a generalised cost, household
  income (k AUD) and party size; behaviour = the chosen mode.
* opinion: the 1996 American National Election Study extract (``statsmodels.datasets.anes96``):
  944 respondents with age, education, income, place size and TV-news days; behaviour = party
  identification, self-placed ideology and expected vote, coarsened to party (Democrat /
  Independent / Republican from PID 0-2 / 3 / 4-6), ideology (liberal / moderate / conservative
  from selfLR 1-3 / 4 / 5-7) and vote (Clinton / Dole).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

MODES = ("air", "train", "bus", "car")
PARTIES = ("Democrat", "Independent", "Republican")
IDEOLOGIES = ("liberal", "moderate", "conservative")
VOTES = ("Clinton", "Dole")
EDUCATION = ("grade school", "some high school", "high school", "some college", "college degree",
             "master's degree", "PhD")
#: ANES 1996 income codes 1-24 -> (low, high) household income in k USD (24: 105 and over)
INCOME_BANDS = ((0, 3), (3, 5), (5, 7), (7, 9), (9, 10), (10, 11), (11, 12), (12, 13), (13, 14), (14, 15),
                (15, 17), (17, 20), (20, 22), (22, 25), (25, 30), (30, 35), (35, 40), (40, 45), (45, 50),
                (50, 60), (60, 75), (75, 90), (90, 105), (105, None))


@dataclass(frozen=True)
class Mobility:
    """Travel-mode scenarios and choices; ``n`` travellers.

    Attributes:
        cost: in-vehicle cost per mode ``(n, 4)`` AUD.
        time: in-vehicle time per mode ``(n, 4)`` minutes.
        wait: terminal waiting time per mode ``(n, 4)`` minutes (0 for car).
        gc: Greene's generalised cost per mode ``(n, 4)`` (cost + valued time).
        income: household income ``(n,)`` k AUD.
        party: travelling party size ``(n,)``.
        choice: chosen mode index ``(n,)`` into :data:`MODES`.
    """

    cost: np.ndarray
    time: np.ndarray
    wait: np.ndarray
    gc: np.ndarray
    income: np.ndarray
    party: np.ndarray
    choice: np.ndarray

    @property
    def n(self) -> int:
        return len(self.choice)

    def subset(self, idx) -> "Mobility":
        """The travellers ``idx`` (an index array)."""
        return Mobility(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})


@dataclass(frozen=True)
class Opinion:
    """Survey respondents: demographics and coarsened answers; ``n`` respondents.

    Attributes:
        age: years ``(n,)``; educ: 1-7 ``(n,)`` (:data:`EDUCATION`); income: ANES code 1-24 ``(n,)``;
        popul: place population in thousands ``(n,)``; tvnews: days a week watching TV news 0-7 ``(n,)``.
        party, ideology, vote: answer indices ``(n,)`` into :data:`PARTIES`, :data:`IDEOLOGIES`, :data:`VOTES`.
    """

    age: np.ndarray
    educ: np.ndarray
    income: np.ndarray
    popul: np.ndarray
    tvnews: np.ndarray
    party: np.ndarray
    ideology: np.ndarray
    vote: np.ndarray

    @property
    def n(self) -> int:
        return len(self.vote)

    def subset(self, idx) -> "Opinion":
        """The respondents ``idx`` (an index array)."""
        return Opinion(**{k: getattr(self, k)[idx] for k in self.__dataclass_fields__})

    def features(self) -> np.ndarray:
        """Demographic covariates ``(n, 5)``: age/10, educ, income code/4, log10(popul + 1), tvnews."""
        return np.column_stack([self.age / 10, self.educ, self.income / 4, np.log10(self.popul + 1), self.tvnews])


@functools.lru_cache(maxsize=1)
def load_mobility() -> Mobility:
    """All 210 travellers of ``statsmodels.datasets.modechoice`` (rows ordered air, train, bus, car)."""
    import statsmodels.api as sm

    d = sm.datasets.modechoice.load_pandas().data.sort_values(["individual", "mode"])
    n = d["individual"].nunique()

    def col(name):
        return d[name].to_numpy(float).reshape(n, 4)

    choice = col("choice").argmax(1)
    return Mobility(cost=col("invc"), time=col("invt"), wait=col("ttme"), gc=col("gc"), income=col("hinc")[:, 0],
                    party=col("psize")[:, 0], choice=choice.astype(np.int64))


@functools.lru_cache(maxsize=1)
def load_opinion() -> Opinion:
    """All 944 respondents of ``statsmodels.datasets.anes96``, answers coarsened (module docstring)."""
    import statsmodels.api as sm

    d = sm.datasets.anes96.load_pandas().data
    pid = d["PID"].to_numpy(int)
    lr = d["selfLR"].to_numpy(int)
    return Opinion(age=d["age"].to_numpy(float), educ=d["educ"].to_numpy(int), income=d["income"].to_numpy(int),
                   popul=d["popul"].to_numpy(float), tvnews=d["TVnews"].to_numpy(int),
                   party=np.where(pid <= 2, 0, np.where(pid == 3, 1, 2)),
                   ideology=np.where(lr <= 3, 0, np.where(lr == 4, 1, 2)), vote=d["vote"].to_numpy(int))


def behaviour_of(domain: str, people) -> np.ndarray:
    """The humans' own answers: ``(n,)`` chosen modes (mobility) or ``(n, 3)`` party, ideology, vote
    (opinion).

    Raises:
        ValueError: an unknown domain.
    """
    if domain == "mobility":
        return np.asarray(people.choice, np.int64)
    if domain == "opinion":
        return np.column_stack([people.party, people.ideology, people.vote]).astype(np.int64)
    raise ValueError(f"domain: expected mobility or opinion, got {domain!r}")
