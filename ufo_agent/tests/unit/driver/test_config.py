"""The shmem device XML of the guest channel."""

import xml.etree.ElementTree as ET

import pytest

from ufo_agent.driver.libvirt import config


def test_shmem_device_for_hot_plug():
    xml = config.shmem_xml('ufo-0b5e5c4e-9d5c-4a0e-8f3b-1c2d3e4f5a6b')
    assert xml == ("<shmem name='ufo-0b5e5c4e-9d5c-4a0e-8f3b-1c2d3e4f5a6b'>"
                   "<model type='ivshmem-plain'/><size unit='M'>1</size>"
                   "</shmem>")


def test_migration_master_role_and_size():
    shmem = ET.fromstring(config.shmem_xml('ufo-x', 4, role='master'))
    assert shmem.attrib == {'name': 'ufo-x', 'role': 'master'}
    assert shmem.find('size').text == '4'
    assert shmem.find('model').get('type') == 'ivshmem-plain'


@pytest.mark.parametrize('name', ["a'b", 'a"b', 'a&b<c>', "x' role='peer"])
def test_name_is_escaped_as_an_attribute(name):
    shmem = ET.fromstring(config.shmem_xml(name, role='master'))
    assert shmem.attrib == {'name': name, 'role': 'master'}


def test_unknown_role_is_refused():
    with pytest.raises(ValueError, match='role'):
        config.shmem_xml('ufo-x', role="master' name='y")
