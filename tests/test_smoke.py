from django.conf import settings


def test_data_dir_is_isolated():
    assert "boocode-test-" in str(settings.DATA_DIR)
