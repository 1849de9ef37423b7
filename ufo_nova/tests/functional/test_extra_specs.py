"""nova-api validates the ufo:* flavor extra specs with UFO's validators.

They reach Nova through the ``nova.api.extra_spec_validators`` entry point
of the installed ufo-nova (setup.cfg), as in a real nova-api.
"""

from nova.tests.functional.api import client
from nova.tests.functional import integrated_helpers

from ufo_nova.tests.functional import base


class TestUFOExtraSpecs(integrated_helpers._IntegratedTestBase):
    ADMIN_API = True
    # Nova validates extra specs from this microversion on.
    microversion = '2.86'

    def setUp(self):
        self.flags(api_paste_config=base.api_paste_config(), group='wsgi')
        super().setUp()
        self.flavor_id = self._create_flavor()

    def set_specs(self, **specs):
        return self.api.post_extra_spec(self.flavor_id,
                                        {'extra_specs': specs})

    def assert_refused(self, key, value, says):
        ex = self.assertRaises(client.OpenStackApiException, self.set_specs,
                               **{key: value})
        self.assertEqual(400, ex.response.status_code)
        self.assertIn(says, str(ex))
        self.assertNotIn(key, self.api.get_extra_specs(self.flavor_id))

    def test_valid_values_accepted(self):
        self.set_specs(**{'ufo:class': 'lc', 'ufo:managed': 'false'})
        self.set_specs(**{'ufo:class': 'BE'})
        self.set_specs(**{'ufo:managed': 'Yes'})
        self.assertEqual({'ufo:class': 'BE', 'ufo:managed': 'Yes'},
                         self.api.get_extra_specs(self.flavor_id))

    def test_invalid_values_refused(self):
        self.assert_refused('ufo:class', 'bogus', "'bogus' is not of the")
        self.assert_refused('ufo:managed', 'maybe', "'maybe' is not of the")
        self.assert_refused('ufo:managed', '', "'' is not of the")

    def test_latency_target_accepted(self):
        self.set_specs(**{'ufo:latency_target_us': '2500',
                          'ufo:latency_percentile': '99.9'})
        self.assertEqual({'ufo:latency_target_us': '2500',
                          'ufo:latency_percentile': '99.9'},
                         self.api.get_extra_specs(self.flavor_id))

    def test_latency_target_out_of_bounds_refused(self):
        self.assert_refused('ufo:latency_target_us', '0',
                            "'0' is less than the min value")
        self.assert_refused('ufo:latency_target_us', '10000001',
                            "is greater than the max value")
        self.assert_refused('ufo:latency_target_us', '2ms',
                            "'2ms' is not a valid integer value")
        self.assert_refused('ufo:latency_percentile', '100',
                            "'100' is not of the")
        self.assert_refused('ufo:latency_percentile', 'p99',
                            "'p99' is not of the")

    def test_unknown_ufo_key_refused(self):
        self.assert_refused('ufo:manged', 'false',
                            "extra spec 'ufo:manged' does not appear to be "
                            "a valid extra spec")
