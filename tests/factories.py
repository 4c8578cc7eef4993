"""factory_boy factories for the domain models."""

import factory
from django.contrib.auth import get_user_model

from coordination.models import Agent, Constellation


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("correct horse battery staple")


class ConstellationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Constellation

    name = factory.Sequence(lambda n: f"Constellation {n}")
    partner = factory.SubFactory(UserFactory)


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent

    constellation = factory.SubFactory(ConstellationFactory)
    name = factory.Sequence(lambda n: f"Agent{n}")
    role = "Test agent"
